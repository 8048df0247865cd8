/* dlopen_test: loads libq4vk.so at run time, resolves every function the header declares
 * (the list is read from q4vk.h itself, so new exports are covered automatically), and
 * calls a few through the resolved pointers. Not linked against q4vk.
 * Usage: dlopen_test path/to/libq4vk.so path/to/q4vk.h */
#define _POSIX_C_SOURCE 200809L
#include "q4vk.h"
#include "util.h"

#include <ctype.h>
#include <dlfcn.h>

#define MAX_FUNCS 256

/* Names of the functions declared in the header: with comments removed, every q4vk_
   identifier followed by '(' (typedefs of function pointers read "(*q4vk_x)(" and so are
   not matched). Returns the count, or -1 on error. */
static int declared_functions(const char *header_path, char names[][64]) {
    size_t len = 0;
    char *text = read_file(header_path, &len);
    if (!text) return -1;
    for (size_t i = 0; i < len; i++) { /* blank out comments */
        if (text[i] == '/' && i + 1 < len && text[i + 1] == '/') {
            while (i < len && text[i] != '\n') text[i++] = ' ';
        } else if (text[i] == '/' && i + 1 < len && text[i + 1] == '*') {
            size_t j = i + 2;
            while (j + 1 < len && !(text[j] == '*' && text[j + 1] == '/')) j++;
            for (size_t e = j + 2 < len ? j + 2 : len; i < e; i++) text[i] = ' ';
            i--;
        }
    }
    int count = 0;
    for (size_t i = 0; i + 5 < len; i++) {
        if (strncmp(text + i, "q4vk_", 5) || (i > 0 && (isalnum((unsigned char)text[i - 1]) ||
                                                         text[i - 1] == '_')))
            continue;
        size_t j = i;
        while (j < len && (isalnum((unsigned char)text[j]) || text[j] == '_')) j++;
        size_t end = j;
        while (j < len && isspace((unsigned char)text[j])) j++;
        if (j < len && text[j] == '(' && end - i < 64) {
            char name[64];
            memcpy(name, text + i, end - i);
            name[end - i] = 0;
            int seen = 0;
            for (int k = 0; k < count; k++) seen |= !strcmp(names[k], name);
            if (!seen && count < MAX_FUNCS) strcpy(names[count++], name);
        }
        i = end;
    }
    free(text);
    return count;
}

/* dlsym into a typed function pointer without an object-to-function pointer cast. */
#define RESOLVE(lib, fn, var)                      \
    do {                                           \
        void *sym_ = dlsym(lib, #fn);              \
        memcpy(&(var), &sym_, sizeof sym_);        \
    } while (0)

static int failures;
static void expect(int ok, const char *what) {
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s libq4vk.so q4vk.h\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("FAIL dlopen(%s): %s\n", argv[1], dlerror());
        return 1;
    }
    static char names[MAX_FUNCS][64];
    int count = declared_functions(argv[2], names);
    expect(count >= 11, "the header declares at least the 11 functions of the CPU API");
    for (int i = 0; i < count; i++) {
        dlerror();
        void *sym = dlsym(lib, names[i]);
        const char *err = dlerror();
        printf("%s dlsym %s%s%s\n", sym ? "ok  " : "FAIL", names[i], err ? ": " : "",
               err ? err : "");
        if (!sym) failures++;
    }

    uint32_t (*version)(void);
    const char *(*version_string)(void);
    const char *(*status_str)(q4vk_status);
    size_t (*last_error)(char *, size_t);
    void (*desc_default)(q4vk_weight_quantize_desc *);
    q4vk_status (*quantize_size)(const q4vk_weight_quantize_desc *, size_t *, size_t *);
    q4vk_status (*quantize)(const q4vk_weight_quantize_desc *, const void *, size_t, int8_t *,
                            size_t, void *, size_t);
    RESOLVE(lib, q4vk_version, version);
    RESOLVE(lib, q4vk_version_string, version_string);
    RESOLVE(lib, q4vk_status_str, status_str);
    RESOLVE(lib, q4vk_last_error_message, last_error);
    RESOLVE(lib, q4vk_weight_quantize_desc_default, desc_default);
    RESOLVE(lib, q4vk_weight_quantize_size, quantize_size);
    RESOLVE(lib, q4vk_weight_quantize, quantize);
    if (!version || !version_string || !status_str || !last_error || !desc_default ||
        !quantize_size || !quantize) {
        printf("FAIL a function needed for the calls below did not resolve\n");
        return 1;
    }

    expect(version() == (uint32_t)Q4VK_HEADER_VERSION, "q4vk_version() == Q4VK_HEADER_VERSION");
    printf("     q4vk_version_string() = \"%s\"\n", version_string());
    const char *s_ok = status_str(Q4VK_OK), *s_unknown = status_str(4000000000u);
    expect(s_ok && s_ok[0], "q4vk_status_str(Q4VK_OK) is a non-empty string");
    expect(s_unknown && s_unknown[0], "q4vk_status_str(unknown code) is a non-empty string");

    /* A small int4 quantization: one column of 64 rows (times 16 columns) holding -7..7. */
    q4vk_weight_quantize_desc d;
    desc_default(&d);
    d.k = 64;
    d.n = 16;
    d.threads = 1;
    size_t qb = 0, sb = 0;
    expect(quantize_size(&d, &qb, &sb) == Q4VK_OK && qb == 64 * 16 / 2 && sb == 16 * 2,
           "q4vk_weight_quantize_size: 512 qweight bytes, 32 scale bytes");
    uint16_t w[64 * 16], scale[16];
    int8_t q[64 * 16 / 2];
    for (int i = 0; i < 64 * 16; i++) w[i] = f32_to_f16((float)((i / 16) % 15 - 7));
    expect(quantize(&d, w, sizeof w, q, sizeof q, scale, sizeof scale) == Q4VK_OK,
           "q4vk_weight_quantize through the pointer returns Q4VK_OK");
    int scales_one = 1;
    for (int i = 0; i < 16; i++) scales_one &= f16_to_f32(scale[i]) == 1.0f;
    expect(scales_one, "every scale is max|w| / 7 = 1");
    /* Row r holds r % 15 - 7 in every column, so the codes equal the weights and each
       stored nibble (code + 8) v appears 16 * (rows with r % 15 == v - 1) times. */
    int histogram[16] = {0}, hist_ok = 1;
    for (size_t i = 0; i < sizeof q; i++) {
        histogram[(uint8_t)q[i] & 0xf]++;
        histogram[(uint8_t)q[i] >> 4]++;
    }
    for (int v = 0; v < 16; v++) {
        int rows = 0;
        for (int r = 0; r < 64; r++) rows += v >= 1 && r % 15 == v - 1;
        hist_ok &= histogram[v] == 16 * rows;
    }
    expect(hist_ok, "qweight holds each code -7..7 as often as the weight does");

    d.k = 0;
    expect(quantize(&d, w, sizeof w, q, sizeof q, scale, sizeof scale) ==
               Q4VK_ERROR_INVALID_ARGUMENT,
           "k = 0 through the pointer: Q4VK_ERROR_INVALID_ARGUMENT");
    char msg[256];
    size_t full = last_error(msg, sizeof msg);
    printf("     q4vk_last_error_message: \"%s\"\n", msg);
    expect(full > 0 && strlen(msg) == (full < sizeof msg ? full : sizeof msg - 1),
           "q4vk_last_error_message returns the message's length");

    if (dlclose(lib) != 0) {
        printf("FAIL dlclose: %s\n", dlerror());
        failures++;
    }
    printf("\n%s: %d functions resolved from %s, %d failure(s)\n", failures ? "FAILED" : "PASSED",
           count, argv[1], failures);
    return failures ? 1 : 0;
}
