//! `--jsonl FILE`: the table's timed rows as JSON lines appended to FILE, one object per
//! row, in the form of bench/RESULTS.md's "Machine-readable results" (the objects
//! `scripts/bench-compare.py --from-table` makes of the printed table, which
//! `scripts/bench-compare.py A.jsonl B.jsonl` compares). `commit` is the build's
//! (`Q4VK_GIT_COMMIT` of build.rs, else null), `date` the run's UTC date, `device` and `driver`
//! as the device reports them (`driverInfo`, else the decoded `driverVersion`); `peer` is
//! empty (the bench runs no peers); no `source`.

use super::table::Row;
use super::Options;
use ash::vk;
use q4vk::error::{Error, Result};
use q4vk::vk::context::Context;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// What every line of a run shares.
struct Run {
    commit: Option<&'static str>,
    date: String,
    device: String,
    driver: Option<String>,
    /// Weight form: a GGUF block type's name, or `g<group>`, then `-offsets` or `-zp`, then
    /// `-act-order`.
    form: String,
    /// `f16` or `f32` activations.
    x: &'static str,
}

/// One timed row.
struct Case<'a> {
    n: usize,
    k: usize,
    m: u32,
    /// The kernel path as the table prints it.
    path: &'a str,
    us: f64,
    gbps: f64,
    hot_us: f64,
    rel_err: f64,
    /// `--chain`: µs per call in a chain, cold and hot.
    chain_us: Option<(f64, f64)>,
}

/// The open FILE of `--jsonl` and what its lines share.
pub(crate) struct JsonLines {
    file: std::fs::File,
    name: PathBuf,
    run: Run,
}

impl JsonLines {
    /// Opens `name` for appending (created if absent) for the rows of `ctx`'s run.
    pub(crate) fn open(name: &Path, ctx: &Context, opt: &Options) -> Result<JsonLines> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(name)
            .map_err(|e| io_error(name, e))?;
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut form = match opt.block_type {
            Some(ty) => ty.name().to_string(),
            None => format!("g{}", opt.group_size()),
        };
        if opt.offsets {
            form.push_str("-offsets");
        } else if opt.zeros {
            form.push_str("-zp");
        }
        if opt.act_order {
            form.push_str("-act-order");
        }
        let run = Run {
            commit: option_env!("Q4VK_GIT_COMMIT"),
            date: utc_date(secs),
            device: ctx.device_name().to_string(),
            driver: driver(ctx),
            form,
            x: if opt.x_f16 { "f16" } else { "f32" },
        };
        Ok(JsonLines {
            file,
            name: name.to_path_buf(),
            run,
        })
    }

    /// Appends the line of row `r`, whose kernel path the table prints as `path`.
    pub(crate) fn write(&mut self, r: &Row, path: &str) -> Result<()> {
        let case = Case {
            n: r.n,
            k: r.k,
            m: r.m,
            path,
            us: r.cold_us,
            gbps: r.bytes / r.cold_us / 1e3,
            hot_us: r.hot_us,
            rel_err: r.rel_err,
            chain_us: r.chain_us,
        };
        let text = line(&self.run, &case) + "\n";
        self.file
            .write_all(text.as_bytes())
            .map_err(|e| io_error(&self.name, e))
    }
}

fn io_error(name: &Path, e: std::io::Error) -> Error {
    Error::InvalidArgument(format!("--jsonl {}: {e}", name.display()))
}

/// The JSON object of one row, keys in bench-compare.py's order.
fn line(run: &Run, c: &Case) -> String {
    let (path, tile, slices) = split_path(c.path);
    let mut s = String::with_capacity(400);
    let _ = write!(
        s,
        "{{\"commit\": {}, \"date\": {}, \"device\": {}, \"driver\": {}, \
         \"shape\": {{\"n\": {}, \"k\": {}}}, \"m\": {}, \"type\": {}, \"x\": {}, \"path\": {}, \
         \"us\": {}, \"gbps\": {}, \"peer\": [], \"hot_us\": {}, \"rel_err\": {}",
        string(run.commit),
        string(Some(&run.date)),
        string(Some(&run.device)),
        string(run.driver.as_deref()),
        c.n,
        c.k,
        c.m,
        string(Some(&run.form)),
        string(Some(run.x)),
        string(Some(&path)),
        decimal(c.us, 3),
        decimal(c.gbps, 2),
        decimal(c.hot_us, 3),
        if c.rel_err.is_finite() {
            format!("{:.2e}", c.rel_err)
        } else {
            "null".to_string()
        },
    );
    if let Some(t) = tile {
        let _ = write!(s, ", \"tile\": {}", string(Some(&t)));
    }
    if let Some(z) = slices {
        let _ = write!(s, ", \"slices\": {z}");
    }
    if let Some((cold, hot)) = c.chain_us {
        let _ = write!(
            s,
            ", \"chain_us\": {}, \"chain_hot_us\": {}",
            decimal(cold, 3),
            decimal(hot, 3)
        );
    }
    s.push('}');
    s
}

/// A JSON string (UTF-8 kept as is; quote, backslash and control characters escaped), or
/// `null`.
fn string(v: Option<&str>) -> String {
    let Some(v) = v else {
        return "null".to_string();
    };
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for c in v.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            '\u{8}' => s.push_str("\\b"),
            '\u{c}' => s.push_str("\\f"),
            c if c < ' ' => {
                let _ = write!(s, "\\u{:04x}", c as u32);
            }
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

/// `v` with at most `places` decimals (trailing zeros dropped, one kept), or `null` where it
/// is not finite.
fn decimal(v: f64, places: usize) -> String {
    if !v.is_finite() {
        return "null".to_string();
    }
    let s = format!("{v:.places$}");
    match s.find('.') {
        Some(dot) => {
            let end = s.trim_end_matches('0').len().max(dot + 2);
            s[..end].to_string()
        }
        None => s + ".0",
    }
}

/// (path, tile, slices) as bench-compare.py's `normalize_path` makes them: a shape the rules
/// chose, `[t,s,m,k,a,g]`, becomes `[rule]` and goes to `tile`, its ` ×Z K slices` to
/// `slices`; runs of white space become one space.
fn split_path(path: &str) -> (String, Option<String>, Option<u32>) {
    let mut path = path.to_string();
    let (mut tile, mut slices) = (None, None);
    let bracket = path.match_indices('[').find_map(|(at, _)| {
        let len = path[at + 1..].find(|c: char| !(c.is_ascii_digit() || c == ','))?;
        (len > 0 && path[at + 1 + len..].starts_with(']')).then_some((at, at + 1 + len))
    });
    if let Some((open, close)) = bracket {
        tile = Some(path[open + 1..close].to_string());
        path.replace_range(open..=close, "[rule]");
        let found = path.match_indices('×').find_map(|(at, x)| {
            let digits = &path[at + x.len()..];
            let len = digits
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(digits.len());
            let z: u32 = digits[..len].parse().ok()?;
            digits[len..].starts_with(" K slices").then(|| {
                let start = path[..at].trim_end().len();
                (start, at + x.len() + len + " K slices".len(), z)
            })
        });
        if let Some((start, end, z)) = found {
            slices = Some(z).filter(|&z| z > 0);
            path.replace_range(start..end, "");
        }
    }
    (
        path.split_whitespace().collect::<Vec<_>>().join(" "),
        tile,
        slices,
    )
}

/// `YYYY-MM-DD` of `secs` past the Unix epoch, in UTC.
fn utc_date(secs: u64) -> String {
    // Days to the civil date (H. Hinnant's `civil_from_days`), eras of 400 years from
    // 0000-03-01.
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The driver as the device reports it: `driverInfo` (`VK_KHR_driver_properties`: the
/// NVIDIA driver's version, Mesa's release), else `driverVersion` decoded (NVIDIA's own
/// fields, else Vulkan's version fields).
fn driver(ctx: &Context) -> Option<String> {
    let (instance, physical) = (&ctx.device.instance.instance, ctx.device.physical);
    // SAFETY: a valid physical device of this instance.
    let listed = unsafe { instance.enumerate_device_extension_properties(physical) }
        .unwrap_or_default()
        .iter()
        .any(|e| e.extension_name_as_c_str() == Ok(ash::khr::driver_properties::NAME));
    if listed {
        let mut props = vk::PhysicalDeviceDriverProperties::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default().push_next(&mut props);
        // SAFETY: as above; the driver struct is chained only where the device lists its
        // extension.
        unsafe { instance.get_physical_device_properties2(physical, &mut props2) };
        let info = props
            .driver_info_as_c_str()
            .map(|s| s.to_string_lossy().trim().to_string())
            .unwrap_or_default();
        if !info.is_empty() {
            return Some(info);
        }
    }
    // SAFETY: as above.
    let p = unsafe { instance.get_physical_device_properties(physical) };
    let v = p.driver_version;
    Some(if p.vendor_id == 0x10DE {
        format!("{}.{}.{:02}", v >> 22, (v >> 14) & 0xFF, (v >> 6) & 0xFF)
    } else {
        format!(
            "{}.{}.{}",
            vk::api_version_major(v),
            vk::api_version_minor(v),
            vk::api_version_patch(v)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> Run {
        Run {
            commit: Some("abc1234"),
            date: "2026-12-03".to_string(),
            device: "NVIDIA H200".to_string(),
            driver: Some("580.159.04".to_string()),
            form: "g32".to_string(),
            x: "f16",
        }
    }

    /// bench-compare.py's self-test reads these very lines (`BENCH_LINES`).
    fn compare_script() -> &'static str {
        include_str!("../../../scripts/bench-compare.py")
    }

    #[test]
    fn rule_shape_line() {
        let case = Case {
            n: 8192,
            k: 28672,
            m: 64,
            path: "coopmat GEMM [4,4,32,1,2,1] ×4 K slices x-fragments",
            us: 171.6,
            gbps: 889.04,
            hot_us: 171.55,
            rel_err: 2.7e-7,
            chain_us: None,
        };
        let got = line(&run(), &case);
        let want = "{\"commit\": \"abc1234\", \"date\": \"2026-12-03\", \"device\": \"NVIDIA H200\", \
                    \"driver\": \"580.159.04\", \"shape\": {\"n\": 8192, \"k\": 28672}, \"m\": 64, \
                    \"type\": \"g32\", \"x\": \"f16\", \"path\": \"coopmat GEMM [rule] x-fragments\", \
                    \"us\": 171.6, \"gbps\": 889.04, \"peer\": [], \"hot_us\": 171.55, \
                    \"rel_err\": 2.70e-7, \"tile\": \"4,4,32,1,2,1\", \"slices\": 4}";
        assert_eq!(got, want);
        assert!(
            compare_script().contains(&got),
            "bench-compare.py lacks {got}"
        );
    }

    #[test]
    fn chain_times_close_the_line() {
        let case = Case {
            n: 256,
            k: 1536,
            m: 1,
            path: "subgroup",
            us: 5.5,
            gbps: 50.0,
            hot_us: 5.0,
            rel_err: 1e-7,
            chain_us: Some((4.25, 3.5)),
        };
        let got = line(&run(), &case);
        assert!(
            got.ends_with(", \"chain_us\": 4.25, \"chain_hot_us\": 3.5}"),
            "{got}"
        );
    }

    #[test]
    fn escapes_and_nulls() {
        let mut r = run();
        r.commit = None;
        r.device = "dev \"q\" \\ \u{1}\t\n×".to_string();
        r.driver = None;
        let case = Case {
            n: 32,
            k: 75,
            m: 1,
            path: "coopmat 2×4",
            us: 5.0,
            gbps: f64::NAN,
            hot_us: 4.123456,
            rel_err: f64::INFINITY,
            chain_us: None,
        };
        let got = line(&r, &case);
        assert_eq!(
            got,
            "{\"commit\": null, \"date\": \"2026-12-03\", \"device\": \"dev \\\"q\\\" \\\\ \\u0001\\t\\n×\", \
             \"driver\": null, \"shape\": {\"n\": 32, \"k\": 75}, \"m\": 1, \"type\": \"g32\", \
             \"x\": \"f16\", \"path\": \"coopmat 2×4\", \"us\": 5.0, \"gbps\": null, \"peer\": [], \
             \"hot_us\": 4.123, \"rel_err\": null}"
        );
        assert!(
            compare_script().contains(&got),
            "bench-compare.py lacks {got}"
        );
    }

    #[test]
    fn paths() {
        let p = |s| split_path(s);
        assert_eq!(p("subgroup"), ("subgroup".into(), None, None));
        assert_eq!(p("coopmat 2×4"), ("coopmat 2×4".into(), None, None));
        // A shape the run fixed keeps its slices in the path.
        assert_eq!(
            p("coopmat GEMM 2,4,64,1 ×2 K slices x-fragments"),
            (
                "coopmat GEMM 2,4,64,1 ×2 K slices x-fragments".into(),
                None,
                None
            )
        );
        assert_eq!(
            p("coopmat GEMM [2,4,64,1,4,1] x-fragments rounded reused"),
            (
                "coopmat GEMM [rule] x-fragments rounded reused".into(),
                Some("2,4,64,1,4,1".into()),
                None
            )
        );
        assert_eq!(
            p("coopmat GEMM [4,4,32,1,2,1] ×16 K slices"),
            (
                "coopmat GEMM [rule]".into(),
                Some("4,4,32,1,2,1".into()),
                Some(16)
            )
        );
    }

    #[test]
    fn numbers_and_dates() {
        assert_eq!(decimal(54.5, 3), "54.5");
        assert_eq!(decimal(54.0, 3), "54.0");
        assert_eq!(decimal(0.00049, 3), "0.0");
        assert_eq!(decimal(1.23456, 2), "1.23");
        assert_eq!(decimal(f64::NEG_INFINITY, 2), "null");
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(1_709_251_199), "2024-02-29");
        assert_eq!(utc_date(1_709_251_200), "2024-03-01");
        assert_eq!(utc_date(4_102_444_799), "2099-12-31");
    }
}
