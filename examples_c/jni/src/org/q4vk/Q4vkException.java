package org.q4vk;

/**
 * A q4vk call returned a status other than {@code Q4VK_OK}. The message is
 * {@code q4vk_status_str(status) + ": " + q4vk_last_error_message()} of the failing call.
 */
public class Q4vkException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int status;
    private final String detail;

    /** Called from the JNI shim. */
    public Q4vkException(int status, String statusName, String detail) {
        super(statusName + ": " + detail);
        this.status = status;
        this.detail = detail;
    }

    /** The {@code q4vk_status} code (see {@link Q4vk#ERROR_INVALID_ARGUMENT} etc.). */
    public int status() {
        return status;
    }

    /** q4vk's own message ({@code q4vk_last_error_message}). */
    public String detail() {
        return detail;
    }
}
