//! GPUs and energy through a captured tree whose counters move while proctor samples it: a RAPL
//! package at 20 W (with a wrap of its counter on the way), a DRM client busy half the time,
//! shared by a process and its fork (counted once), and a hwmon power sensor.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{json, proctor};

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// A process: its stat, statm and status, and a DRM fd 3 (plus a plain fd 0).
fn process(root: &Path, pid: u32, ppid: u32, comm: &str) {
    let stat = format!(
        "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194304 97 0 0 0 5 3 0 0 20 0 1 0 1000 3133440 358 \
         18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 1 1 1 1 1 1 1 0\n"
    );
    write(root, &format!("proc/{pid}/stat"), &stat);
    write(root, &format!("proc/{pid}/statm"), "765 427 399 5 0 123 0\n");
    write(root, &format!("proc/{pid}/status"), &format!("Name:\t{comm}\nUid:\t1000\t1000\t1000\t1000\n"));
    write(root, &format!("proc/{pid}/cmdline"), &format!("{comm}\0"));
    std::fs::create_dir_all(root.join(format!("proc/{pid}/fd"))).expect("mkdir");
    std::os::unix::fs::symlink("/dev/dri/renderD128", root.join(format!("proc/{pid}/fd/3"))).expect("link");
    std::os::unix::fs::symlink("/dev/null", root.join(format!("proc/{pid}/fd/0"))).expect("link");
    write(root, &format!("proc/{pid}/fdinfo/0"), "pos:\t0\nflags:\t02\nmnt_id:\t1\nino:\t2\n");
}

/// Rewrites a counter file in place, as the kernel's files change: same length, no truncation
/// (a truncating write would let a read see an empty file, and a rename would leave proctor's
/// kept-open fd on the old file).
fn rewrite(root: &Path, path: &str, text: &str) {
    use std::os::unix::fs::FileExt;
    let file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(root.join(path)).expect("open");
    file.write_all_at(text.as_bytes(), 0).expect("write");
}

fn fdinfo(busy_ns: u64) -> String {
    format!(
        "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-client-id:\t42\ndrm-pdev:\t0000:03:00.0\n\
         drm-resident-vram:\t65536 KiB\ndrm-resident-gtt:\t1024 KiB\ndrm-engine-gfx:\t{busy_ns:>20} ns\n\
         drm-engine-compute:\t0 ns\n"
    )
}

const RANGE_UJ: u64 = 262_143_328_850;

#[test]
fn snapshot_reports_watts_per_domain_and_gpu_use_per_process_from_moving_counters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "proc/stat", "cpu  1 0 1 10 0 0 0 0 0 0\nbtime 1\n");
    write(root, "proc/meminfo", "MemTotal: 1048576 kB\nMemAvailable: 524288 kB\n");
    write(root, "proc/uptime", "100.0 50.0\n");
    std::fs::create_dir_all(root.join("dev/dri")).expect("mkdir");
    process(root, 4242, 1, "trainer");
    process(root, 4243, 4242, "trainer-fork");
    write(root, "sys/class/powercap/intel-rapl:0/name", "package-0\n");
    write(root, "sys/class/powercap/intel-rapl:0/max_energy_range_uj", &format!("{RANGE_UJ}\n"));
    write(root, "sys/class/hwmon/hwmon3/name", "amdgpu\n");
    write(root, "sys/class/hwmon/hwmon3/power1_average", "35000000\n");
    // The counters move with the clock: 20 W on the package, starting 1 J before the wrap, and
    // the GPU busy half of the time.
    let start = Instant::now();
    for pid in [4242, 4243] {
        write(root, &format!("proc/{pid}/fdinfo/3"), "");
    }
    let moving = move |root: &Path| {
        let ns = start.elapsed().as_nanos() as u64;
        let uj = (RANGE_UJ - 1_000_000 + ns / 50) % (RANGE_UJ + 1);
        rewrite(root, "sys/class/powercap/intel-rapl:0/energy_uj", &format!("{uj:>20}\n"));
        for pid in [4242, 4243] {
            rewrite(root, &format!("proc/{pid}/fdinfo/3"), &fdinfo(ns / 2));
        }
    };
    moving(root);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, root) = (Arc::clone(&stop), root.to_path_buf());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                moving(&root);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let out = proctor(&[
        "snapshot",
        "--root",
        root.to_str().expect("utf8"),
        "--count",
        "5",
        "--interval",
        "400ms",
        "--top",
        "5",
        "--format",
        "json",
    ]);
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let last: serde_json::Value = serde_json::from_str(text.lines().last().expect("lines")).expect("json");
    let host = &last["host"];
    let domains: Vec<&str> =
        host["power"].as_array().expect("power").iter().filter_map(|d| d["domain"].as_str()).collect();
    assert_eq!(domains, ["rapl:package-0", "hwmon:amdgpu/power1"], "{host}");
    // The file is rewritten every 5 ms and read every 400 ms: within a few percent of 20 W.
    let package = host["power"][0]["watts"].as_f64().expect("package watts");
    assert!((17.0..23.0).contains(&package), "package {package} W: {host}");
    assert_eq!(host["power"][1]["watts"].as_f64(), Some(35.0));
    let total = host["power_host_watts"].as_f64().expect("the host's total");
    assert_eq!(total, package, "the hwmon sensor is not in the host's total");

    let gpus = host["gpus"].as_array().expect("gpus");
    assert_eq!(gpus.len(), 1, "{host}");
    assert_eq!(gpus[0]["id"], "drm:0000:03:00.0");
    assert_eq!(gpus[0]["clients"], 1, "one client shared by a process and its fork is counted once");
    assert_eq!(gpus[0]["memory_used_bytes"].as_u64(), Some((65_536 + 1024) * 1024));
    let busy = gpus[0]["busy_percent"].as_f64().unwrap_or_else(|| panic!("device busy: {text}"));
    assert!((40.0..60.0).contains(&busy), "device busy {busy}%");

    let rows = last["processes"]["top"].as_array().expect("top");
    let row = |pid: u64| rows.iter().find(|r| r["pid"].as_u64() == Some(pid)).expect("the process is listed");
    let trainer = row(4242);
    let gpu = trainer["gpu_percent"].as_f64().expect("gpu_percent of the client's lowest pid");
    assert!((40.0..60.0).contains(&gpu), "trainer {gpu}%");
    assert_eq!(trainer["gpu_memory_bytes"].as_u64(), Some((65_536 + 1024) * 1024));
    let fork = row(4243);
    assert!(
        fork["gpu_percent"].is_null() && fork["gpu_memory_bytes"].is_null(),
        "the fork is not counted again: {fork}"
    );
    assert_eq!(last["agent"]["drm_worker"]["clients"], 1);
    assert_eq!(last["agent"]["drm_worker"]["processes"], 2);
}

#[test]
fn no_gpu_and_no_energy_counters_leave_the_documents_as_they_were() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "proc/stat", "cpu  1 0 1 10 0 0 0 0 0 0\nbtime 1\n");
    let v = json(&proctor(&[
        "snapshot",
        "--root",
        dir.path().to_str().expect("utf8"),
        "--interval",
        "0",
        "--format",
        "json",
    ]));
    let host = v["host"].as_object().expect("host");
    assert!(!host.contains_key("power") && !host.contains_key("gpus"), "{host:?}");
    assert!(host["power_host_watts"].is_null());
    assert!(v["agent"]["drm_worker"].is_null(), "no /dev/dri, no DRM worker");
}

#[test]
fn probe_energy_divides_the_requests_by_the_joules_the_counters_moved_across_a_wrap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    write(&root, "proc/stat", "cpu  1 0 1 10 0 0 0 0 0 0\n");
    write(&root, "sys/class/powercap/intel-rapl:0/name", "package-0\n");
    write(&root, "sys/class/powercap/intel-rapl:0/max_energy_range_uj", &format!("{RANGE_UJ}\n"));
    // 3 J before the wrap; every request the server answers costs exactly half a joule.
    let base = RANGE_UJ - 3_000_000;
    rewrite(&root, "sys/class/powercap/intel-rapl:0/energy_uj", &format!("{base:>20}\n"));
    let counter_root = root.clone();
    let port = super::probe::server(move |index| {
        let uj = (base + (index + 1) * 500_000) % (RANGE_UJ + 1);
        rewrite(&counter_root, "sys/class/powercap/intel-rapl:0/energy_uj", &format!("{uj:>20}\n"));
        super::probe::Reply { delay: Duration::ZERO, status: 200, server_timing: None }
    });
    let url = format!("http://127.0.0.1:{port}/");
    let root_arg = root.to_str().expect("utf8");
    let v = json(&proctor(&["probe", &url, "-n", "20", "--energy", "--root", root_arg, "--format", "json"]));
    let e = &v["energy"];
    assert_eq!(e["requests_completed"], 20, "{e}");
    let joules = e["host_joules"].as_f64().expect("joules");
    assert!((joules - 10.0).abs() < 1e-6, "20 requests at 0.5 J, one wrap on the way: {e}");
    assert!((e["requests_per_joule"].as_f64().expect("per joule") - 2.0).abs() < 1e-6, "{e}");
    assert!(e["mean_watts"].as_f64().is_some_and(|w| w > 0.0), "{e}");
    assert_eq!(e["domains"][0]["domain"], "rapl:package-0");
    assert!(e["why_not"].is_null());
    let text = proctor(&["probe", &url, "-n", "4", "--energy", "--root", root_arg]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("per joule  2.0000 requests/J: 4 requests completed"), "{text}");

    // No counter: the report says why, and the run still succeeds.
    let empty = tempfile::tempdir().expect("tempdir");
    write(empty.path(), "proc/stat", "cpu  1 0 1 10 0 0 0 0 0 0\n");
    let out = proctor(&["probe", &url, "-n", "2", "--energy", "--root", empty.path().to_str().expect("utf8")]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("energy     not measured: no energy counter or power sensor could be read here"), "{text}");
}
