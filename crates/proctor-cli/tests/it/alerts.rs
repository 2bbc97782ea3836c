//! Alerts end to end with `proctor serve`: a loopback webhook receiver counts what it is told
//! under a flapping input with the rate limit on; an unreachable webhook is retried and counted
//! while sampling misses no tick; SIGHUP with a broken file keeps the old rules; a silence made
//! with `proctor alerts silence` holds a firing; a restart neither re-fires nor forgets.
//! (Alertmanager itself: scripts/test.d/66-alertmanager.sh.)

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::flood::{body_json, serve};
use super::{http_get, proctor, proctor_command, Guard};

/// A loopback webhook: every POST body it got, as JSON; answers 200.
fn hook() -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&got);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut data = Vec::new();
            let mut buf = [0u8; 16384];
            let body = loop {
                let Ok(n) = stream.read(&mut buf) else { break None };
                if n == 0 {
                    break None;
                }
                data.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&data).into_owned();
                let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if body.len() >= len {
                    break Some(body[..len].to_string());
                }
            };
            if let Some(body) = body {
                if let Ok(v) = serde_json::from_str(&body) {
                    seen.lock().expect("lock").push(v);
                }
            }
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (url, got)
}

/// A process whose command line is `flapper-TAG 60`, ended (by its pid) when dropped.
struct Flapper(Child);

impl Flapper {
    fn start(tag: &str) -> Flapper {
        Flapper(Command::new("bash").args(["-c", &format!("exec -a flapper-{tag} sleep 60")]).spawn().expect("bash"))
    }
}

impl Drop for Flapper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn alerts(addr: &str) -> serde_json::Value {
    body_json(&http_get(addr, "/api/v1/alerts"))
}

fn log_events(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("alerts/events.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// `proctor serve --rules RULES` recording into DIR/data (made here), with `extra` flags: the
/// guard, its address and the data directory.
fn serve_rules(dir: &Path, rules: &str, interval: &str, extra: &[&str]) -> (Guard, String, std::path::PathBuf) {
    let data = dir.join("data");
    std::fs::create_dir(&data).expect("data dir");
    let mut args = vec!["--data-dir", data.to_str().expect("utf-8"), "--rules", rules];
    args.extend_from_slice(extra);
    let (guard, addr) = serve(proctor_command(), interval, &args);
    (guard, addr, data)
}

fn rules_file(dir: &Path, body: &str) -> String {
    let path = dir.join("rules.yml");
    std::fs::write(&path, body).expect("write rules");
    path.display().to_string()
}

#[test]
fn alerts_check_names_every_mistake_with_its_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: host.cpu.bsy > 90%\n      - alert: B\n        expr: process{name=\"x\"}.rss > 90%\n",
    );
    let out = proctor(&["alerts", "check", &bad]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{bad}:5:15: expr: unknown series `host.cpu.bsy`; closest known: host.cpu.busy_percent")),
        "{err}"
    );
    assert!(err.contains(&format!("{bad}:7:15: expr: compares a size in bytes with a percentage")), "{err}");
    assert!(err.contains("2 mistakes"), "{err}");
    let good = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: host.cpu.busy > 90% for 1m\n",
    );
    let out = proctor(&["alerts", "check", &good]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok: 1 rule"));
}

/// `alerts check` on a file written for Prometheus says in one line that the expressions are
/// not PromQL and where the translations are; a proctor file's own mistakes get no such line;
/// and every translation docs/alerts.md gives is taken.
#[test]
fn a_promql_file_is_pointed_at_the_translations_and_they_are_taken() {
    let dir = tempfile::tempdir().expect("tempdir");
    let hint = "look like PromQL";
    let promql = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: Cpu\n        expr: 100 - avg by (instance) (rate(node_cpu_seconds_total{mode=\"idle\"}[5m])) * 100 > 80\n",
    );
    let out = proctor(&["alerts", "check", &promql]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.matches(hint).count(), 1, "{err}");
    assert!(err.contains("docs/alerts.md, \"From PromQL\""), "{err}");
    let own = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: Cpu\n        expr: rate(process{name=\"x\"}.cpu_seconds_total) > 0.9 and host.cpu.bussy > 90%\n",
    );
    let out = proctor(&["alerts", "check", &own]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("unknown series"), "{err}");
    assert!(!err.contains(hint), "{err}");

    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/alerts.md")).expect("alerts.md");
    let section = doc.split("### From PromQL").nth(1).expect("the section").split("\n#").next().unwrap_or_default();
    let translations: Vec<&str> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.rsplit("| `").next().and_then(|cell| cell.strip_suffix("` |")))
        .collect();
    assert!(translations.len() >= 8, "{translations:?}");
    let mut rules = String::from("groups:\n  - name: g\n    rules:\n");
    for (i, expr) in translations.iter().enumerate() {
        rules.push_str(&format!("      - alert: T{i}\n        expr: '{expr}'\n"));
    }
    let file = rules_file(dir.path(), &rules);
    let out = proctor(&["alerts", "check", &file]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Eight transitions of a flapping process (four firing, four resolved) under a limit of two
/// notifications per 4 s: the webhook hears of each exactly once, in fewer notifications than
/// transitions.
#[test]
fn a_webhook_hears_each_transition_once_under_flapping_with_the_rate_limit_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tag = format!("w{}", std::process::id());
    let rules = rules_file(
        dir.path(),
        &format!(
            "groups:\n  - name: g\n    rules:\n      - alert: Flapper\n        expr: count(process{{cmdline=~\"flapper-{tag} .*\"}}) > 0\nnotify:\n  rate_limit: 2/4s\n  flapping: 100/1m\n"
        ),
    );
    let (url, got) = hook();
    let (_serve, addr, data) = serve_rules(dir.path(), &rules, "200ms", &["--alert-webhook", &url]);
    let transitions = |events: &[serde_json::Value]| {
        events.iter().filter(|e| e["state"] == "firing" || e["state"] == "resolved").count()
    };
    for round in 0..4 {
        let p = Flapper::start(&tag);
        wait_until("firing", Duration::from_secs(10), || transitions(&log_events(&data)) == 2 * round + 1);
        drop(p);
        wait_until("resolved", Duration::from_secs(10), || transitions(&log_events(&data)) == 2 * round + 2);
    }
    // The held ones go out once the limit has room again (at most 4 s on).
    let told = || got.lock().expect("lock").iter().map(|b| b["events"].as_array().map_or(0, Vec::len)).sum::<usize>();
    wait_until("every transition told", Duration::from_secs(15), || told() >= 8);
    std::thread::sleep(Duration::from_millis(600));
    let bodies = got.lock().expect("lock").clone();
    let heard: Vec<(String, String)> = bodies
        .iter()
        .flat_map(|b| b["events"].as_array().cloned().unwrap_or_default())
        .map(|e| (e["state"].as_str().unwrap_or("").to_string(), e["at"].as_str().unwrap_or("").to_string()))
        .collect();
    let unique: BTreeSet<&(String, String)> = heard.iter().collect();
    assert_eq!(heard.len(), 8, "{bodies:#?}");
    assert_eq!(unique.len(), 8, "a transition told twice: {heard:?}");
    assert_eq!(heard.iter().filter(|(s, _)| s == "firing").count(), 4);
    assert!(bodies.len() < 8, "nothing was coalesced: {} notifications", bodies.len());
    assert!(bodies.iter().any(|b| b["summary"].as_str().is_some_and(|s| s.contains("more"))), "{bodies:#?}");
    let status = alerts(&addr);
    assert!(status["coalesced_total"].as_u64() >= Some(1), "{status}");
}

/// Two `serve --no-record --rules` on one machine (one default data directory) keep alert
/// state of their own: the second finds the rule firing by itself and tells its own webhook,
/// where it used to take over the first one's state ("firing", already told) and tell no one.
#[test]
fn a_second_agent_without_a_store_keeps_its_own_alert_state() {
    let home = tempfile::tempdir().expect("tempdir");
    let rules = rules_file(
        home.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: Always\n        expr: host.memory.total > 1MiB\n",
    );
    let start = |extra: &[&str]| {
        let mut command = proctor_command();
        command.env("HOME", home.path()).env("XDG_STATE_HOME", home.path().join("state"));
        let mut args = vec!["--rules", rules.as_str()];
        args.extend_from_slice(extra);
        serve(command, "200ms", &args)
    };
    let (_first, first) = start(&[]);
    wait_until("the first agent's alert firing", Duration::from_secs(15), || alerts(&first)["firing"] == 1);
    let (url, got) = hook();
    let (_second, second) = start(&["--alert-webhook", &url]);
    wait_until("the second agent's webhook told of the firing", Duration::from_secs(15), || {
        got.lock()
            .expect("lock")
            .iter()
            .flat_map(|b| b["events"].as_array().cloned().unwrap_or_default())
            .any(|e| e["state"] == "firing" && e["rule"] == "Always")
    });
    // The status is published after the receivers' queues are handed the event.
    wait_until("the second agent's status to say firing", Duration::from_secs(10), || alerts(&second)["firing"] == 1);
}

/// A silence ends before its time with `alerts silence --expire ID` (the route `DELETE
/// /api/v1/alerts/silences/ID`); an id not in force is refused, naming the ones that are.
#[test]
fn a_silence_is_ended_early_by_its_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: Always\n        expr: host.memory.total > 1MiB\n",
    );
    let (_serve, addr, _data) = serve_rules(dir.path(), &rules, "200ms", &[]);
    let url = format!("http://{addr}");
    wait_until("the rule firing", Duration::from_secs(15), || alerts(&addr)["firing"] == 1);
    let out = proctor(&["alerts", "silence", "Always", "--for", "1h", "--url", &url]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_until("the silence in force", Duration::from_secs(10), || {
        alerts(&addr)["silences"].as_array().is_some_and(|s| s.len() == 1)
    });
    let status = alerts(&addr);
    let id = status["silences"][0]["id"].as_u64().expect("an id");
    let out = proctor(&["alerts", "silence", "--expire", &(id + 7).to_string(), "--url", &url]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains(&format!("no silence {} in force; silences: {id}", id + 7)), "{err}");
    let out = proctor(&["alerts", "silence", "--expire", &id.to_string(), "--url", &url]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.starts_with(&format!("silence {id} on Always ended at ")), "{said}");
    wait_until("no silence in force", Duration::from_secs(10), || {
        alerts(&addr)["silences"].as_array().is_some_and(Vec::is_empty)
    });
    let out = proctor(&["alerts", "silence", "--expire", &id.to_string(), "--url", &url]);
    assert!(!out.status.success(), "an ended silence ended again");
}

#[test]
fn an_unreachable_webhook_is_retried_and_counted_and_sampling_misses_no_tick() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: Always\n        expr: host.memory.total > 1MiB\n",
    );
    let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/", closed.local_addr().expect("addr"));
    drop(closed);
    let (_serve, addr, _data) = serve_rules(dir.path(), &rules, "200ms", &["--alert-webhook", &url]);
    wait_until("two failed attempts", Duration::from_secs(15), || {
        alerts(&addr)["receivers"][0]["failed_attempts_total"].as_u64() >= Some(2)
    });
    let status = alerts(&addr);
    let r = &status["receivers"][0];
    assert!(r["retries_total"].as_u64() >= Some(1), "{r}");
    assert_eq!(r["delivered_total"], 0, "{r}");
    assert!(r["last_error"].as_str().is_some_and(|e| e.contains("Refused")), "{r}");
    assert_eq!(status["firing"], 1, "{status}");
    let agent = body_json(&http_get(&addr, "/api/v1/agent"));
    assert_eq!(agent["missed_ticks_total"], 0, "{agent}");
    let metrics = http_get(&addr, "/metrics");
    assert!(metrics.contains("proctor_alerts{rule=\"Always\",severity=\"none\",state=\"firing\"} 1"), "{metrics}");
    assert!(metrics.contains("proctor_alerts_receiver_failed_attempts_total{receiver=\"webhook\""), "{metrics}");
    // The alert families pass promtool with the rest of the exposition.
    super::promtool_check(&metrics);
}

#[test]
fn sighup_with_a_broken_file_keeps_the_old_rules_and_a_good_one_replaces_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: First\n        expr: host.memory.total > 1MiB\n",
    );
    let (serve_guard, addr, _data) = serve_rules(dir.path(), &rules, "200ms", &[]);
    wait_until("first evaluation", Duration::from_secs(10), || alerts(&addr)["evaluations_total"].as_u64() >= Some(1));
    let hup = |g: &Guard| {
        // SAFETY: kill with the pid of the serve this test started.
        unsafe { libc::kill(g.0.id() as i32, libc::SIGHUP) };
    };
    std::fs::write(&rules, "groups:\n  - name: g\n    rules:\n      - alert: Second\n        expr: host.cpu.busy >\n")
        .expect("write");
    hup(&serve_guard);
    wait_until("the reload error", Duration::from_secs(10), || alerts(&addr)["reload_error"].is_string());
    let status = alerts(&addr);
    assert!(
        status["reload_error"]
            .as_str()
            .is_some_and(|e| e.contains("kept the rules loaded before") && e.contains("line 5")),
        "{status}"
    );
    assert_eq!(status["rules"][0]["name"], "First", "{status}");
    std::fs::write(
        &rules,
        "groups:\n  - name: g\n    rules:\n      - alert: Second\n        expr: host.cpu.busy >= 0%\n",
    )
    .expect("write");
    // The evaluation counters run for the agent's life: a reload does not set them back (issue
    // 33 item 16).
    wait_until("ten evaluations", Duration::from_secs(30), || alerts(&addr)["evaluations_total"].as_u64() >= Some(10));
    let before = alerts(&addr);
    hup(&serve_guard);
    wait_until("the new rules", Duration::from_secs(10), || alerts(&addr)["rules"][0]["name"] == "Second");
    let after = alerts(&addr);
    assert!(after["reload_error"].is_null());
    assert!(after["evaluations_total"].as_u64() >= before["evaluations_total"].as_u64(), "{before} → {after}");
    let cpu = |v: &serde_json::Value| v["evaluation_cpu_seconds_total"].as_f64().unwrap_or(-1.0);
    assert!(cpu(&after) >= cpu(&before) && cpu(&before) >= 0.0, "{before} → {after}");
    let matched = |v: &serde_json::Value| v["selector_rows_matched_total"].as_u64();
    assert!(matched(&after) >= matched(&before), "{before} → {after}");
    // Still serving: SIGHUP did not stop it.
    assert!(http_get(&addr, "/api/v1/agent").starts_with("HTTP/1.1 200"));
}

#[test]
fn a_silence_holds_a_firing_and_a_restart_neither_refires_nor_forgets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tag = format!("s{}", std::process::id());
    let rules = rules_file(
        dir.path(),
        &format!(
            "groups:\n  - name: g\n    rules:\n      - alert: Worker\n        expr: process{{cmdline=~\"flapper-{tag}.*\"}}.rss > 0B\n        labels:\n          severity: page\n"
        ),
    );
    let (url, got) = hook();
    let (serve1, addr, data) = serve_rules(dir.path(), &rules, "200ms", &["--alert-webhook", &url]);
    let args = ["--data-dir", data.to_str().expect("utf-8"), "--rules", &rules, "--alert-webhook", &url];
    let first = Flapper::start(&format!("{tag}-a"));
    let told = || {
        got.lock()
            .expect("lock")
            .iter()
            .flat_map(|b| b["events"].as_array().cloned().unwrap_or_default())
            .collect::<Vec<_>>()
    };
    wait_until("the first firing told", Duration::from_secs(10), || told().len() == 1);
    let out = proctor(&[
        "alerts",
        "silence",
        "Worker",
        "--for",
        "1h",
        "--comment",
        "deploy",
        "--url",
        &format!("http://{addr}"),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("silence 1 on Worker until "));
    wait_until("the silence applied", Duration::from_secs(10), || {
        alerts(&addr)["silences"].as_array().is_some_and(|s| s.len() == 1)
    });
    let second = Flapper::start(&format!("{tag}-b"));
    let second_pid = second.0.id().to_string();
    wait_until("the second firing logged", Duration::from_secs(10), || {
        log_events(&data).iter().any(|e| e["state"] == "firing" && e["labels"]["pid"] == second_pid.as_str())
    });
    let logged = log_events(&data)
        .into_iter()
        .find(|e| e["state"] == "firing" && e["labels"]["pid"] == second_pid.as_str())
        .expect("logged");
    assert_eq!(logged["silenced"], true, "{logged}");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(told().len(), 1, "the silenced firing was told: {:?}", told());

    // Restart: both still fire, nothing fires anew, the silence is still there.
    let before = log_events(&data).len();
    // SAFETY: kill with the pid of the serve this test started.
    unsafe { libc::kill(serve1.0.id() as i32, libc::SIGTERM) };
    drop(serve1);
    let (_serve2, addr) = serve(proctor_command(), "200ms", &args);
    wait_until("evaluations after the restart", Duration::from_secs(10), || {
        alerts(&addr)["evaluations_total"].as_u64() >= Some(5)
    });
    let status = alerts(&addr);
    assert_eq!(status["firing"], 2, "{status}");
    assert_eq!(status["silences"].as_array().map(Vec::len), Some(1), "{status}");
    let after = log_events(&data);
    assert_eq!(after.len(), before, "a restart logged transitions: {:?}", &after[before..]);
    assert_eq!(told().len(), 1);
    drop(first);
    drop(second);
}

/// The one state-changing route is refused on a public bind without a token.
#[test]
fn a_silence_is_refused_on_a_tokenless_public_bind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: host.memory.total > 1MiB\n",
    );
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    let mut command = proctor_command();
    command.args(["serve", "--listen", "0.0.0.0:0", "--insecure", "--interval", "200ms", "--pss-budget", "0"]);
    command.args(["--data-dir", data.to_str().expect("utf-8"), "--rules", &rules]);
    let (_g, addr) = super::flood::started(command);
    let port = addr.rsplit(':').next().expect("port");
    let out = proctor(&["alerts", "silence", "A", "--url", &format!("http://127.0.0.1:{port}")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("HTTP 403") && err.contains("need a token"), "{err}");
}

/// A process that burns a CPU with `burner-TAG` as its command line, ended (by its pid) when
/// dropped.
fn burner(tag: &str) -> Flapper {
    Flapper(
        Command::new("bash")
            .args(["-c", &format!("exec -a burner-{tag} bash -c 'while :; do :; done'")])
            .spawn()
            .expect("bash"),
    )
}

/// A temporary directory, the webhook Alertmanager routes to (what it got), Alertmanager
/// itself and its address; `None` (and a SKIP line) without PROCTOR_ALERTMANAGER.
type WithAlertmanager = (tempfile::TempDir, Arc<Mutex<Vec<serde_json::Value>>>, Guard, String);

fn with_alertmanager() -> Option<WithAlertmanager> {
    let Some(bin) = std::env::var_os("PROCTOR_ALERTMANAGER") else {
        eprintln!("SKIP: Alertmanager end to end: PROCTOR_ALERTMANAGER is not set (scripts/test.d/66-alertmanager.sh sets it)");
        return None;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (hook_url, got) = hook();
    let (am, am_url) = alertmanager(&bin, dir.path(), &hook_url);
    Some((dir, got, am, am_url))
}

/// Alertmanager (`bin`) on a loopback port, routing every alert to the webhook at `hook_url`
/// at once (group_wait and group_interval of 1 s): its guard and address, once it is ready.
fn alertmanager(bin: &std::ffi::OsStr, dir: &Path, hook_url: &str) -> (Guard, String) {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let am_config = dir.join("am.yml");
    std::fs::write(
        &am_config,
        format!(
            "route:\n  receiver: hook\n  group_by: [alertname, pid]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    webhook_configs:\n      - url: {hook_url}\n        send_resolved: true\n"
        ),
    )
    .expect("am config");
    let am = Guard(
        Command::new(bin)
            .arg(format!("--config.file={}", am_config.display()))
            .arg(format!("--storage.path={}", dir.join("am-data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("am.log")).expect("log"))
            .spawn()
            .expect("start alertmanager"),
    );
    let am_url = format!("127.0.0.1:{port}");
    wait_until("alertmanager ready", Duration::from_secs(20), || {
        std::net::TcpStream::connect(&am_url).is_ok() && http_get(&am_url, "/-/ready").starts_with("HTTP/1.1 200")
    });
    (am, am_url)
}

/// A flapping hold spares the other receivers, never Alertmanager: with `flapping: 2/1m` the
/// second firing of an instance is held from a webhook, and Alertmanager still lists it active
/// (it groups and throttles by itself, and an alert it is not sent it takes for resolved).
#[test]
fn alertmanager_hears_a_firing_that_a_flapping_hold_keeps_from_other_receivers() {
    let Some((dir, _, am, am_url)) = with_alertmanager() else { return };
    let tag = format!("amf{}", std::process::id());
    let rules = rules_file(
        dir.path(),
        &format!(
            "groups:\n  - name: g\n    rules:\n      - alert: Flapper\n        expr: count(process{{cmdline=~\"flapper-{tag} .*\"}}) > 0\nnotify:\n  flapping: 2/1m\n  resend: 1s\n"
        ),
    );
    let (other, other_got) = hook();
    let am_flag = format!("http://{am_url}");
    let (_serve, _addr, data) =
        serve_rules(dir.path(), &rules, "200ms", &["--alertmanager", &am_flag, "--alert-webhook", &other]);
    let active = || {
        let listed = body_json(&http_get(&am_url, "/api/v2/alerts?active=true&silenced=false&inhibited=false"));
        listed.as_array().is_some_and(|a| {
            a.iter().any(|x| x["labels"]["alertname"] == "Flapper" && x["status"]["state"] == "active")
        })
    };
    let states = || log_events(&data).iter().filter_map(|e| e["state"].as_str().map(String::from)).collect::<Vec<_>>();
    let count = |state: &str| states().iter().filter(|s| *s == state).count();
    // Fired and resolved once: both told to everyone.
    let first = Flapper::start(&tag);
    wait_until("the first firing", Duration::from_secs(15), || count("firing") == 1);
    wait_until("Alertmanager to list the first firing", Duration::from_secs(15), active);
    drop(first);
    wait_until("the first resolve", Duration::from_secs(15), || count("resolved") == 1);
    wait_until("Alertmanager to take it as resolved", Duration::from_secs(15), || !active());
    // The second firing is the third change in a minute: held as flapping.
    let second = Flapper::start(&tag);
    wait_until("the flapping hold", Duration::from_secs(15), || count("flapping") == 1 && count("firing") == 2);
    wait_until("Alertmanager to list the held firing", Duration::from_secs(15), active);
    let heard_by_other: Vec<String> = other_got
        .lock()
        .expect("lock")
        .iter()
        .flat_map(|b| b["events"].as_array().cloned().unwrap_or_default())
        .filter_map(|e| e["state"].as_str().map(String::from))
        .collect();
    assert_eq!(
        heard_by_other.iter().filter(|s| *s == "firing").count(),
        1,
        "the webhook heard the held firing: {heard_by_other:?}"
    );
    drop(second);
    drop(am);
}

/// Debian's `prometheus-alertmanager` (named by PROCTOR_ALERTMANAGER, as
/// scripts/test.d/66-alertmanager.sh does) on loopback, routing to a webhook this test holds:
/// a CPU burner's alert reaches it firing and then resolved; a silence made through proctor
/// keeps a second firing from Alertmanager altogether.
#[test]
fn alertmanager_gets_a_firing_and_a_resolved_alert_and_a_proctor_silence_holds_the_next() {
    let Some((dir, got, am, am_url)) = with_alertmanager() else { return };
    let tag = format!("am{}", std::process::id());
    let rules = rules_file(
        dir.path(),
        &format!(
            "groups:\n  - name: load\n    rules:\n      - alert: Burner\n        expr: process{{cmdline=~\"burner-{tag}.*\"}}.cpu_percent > 20% for 1s\n        labels:\n          severity: warning\n        annotations:\n          summary: \"{{{{ $labels.name }}}} burns {{{{ $value }}}} of a CPU\"\nnotify:\n  resend: 2s\n"
        ),
    );
    let am_flag = format!("http://{am_url}");
    let (_serve, addr, data) = serve_rules(dir.path(), &rules, "250ms", &["--alertmanager", &am_flag]);
    let statuses = || {
        got.lock()
            .expect("lock")
            .iter()
            .flat_map(|b| b["alerts"].as_array().cloned().unwrap_or_default())
            .map(|a| {
                (a["status"].as_str().unwrap_or("").to_string(), a["labels"]["pid"].as_str().unwrap_or("").to_string())
            })
            .collect::<Vec<_>>()
    };
    let first = burner(&tag);
    let pid = first.0.id().to_string();
    wait_until("Alertmanager's firing notification", Duration::from_secs(30), || {
        statuses().contains(&("firing".to_string(), pid.clone()))
    });
    let body = got.lock().expect("lock")[0].clone();
    assert_eq!(body["alerts"][0]["labels"]["alertname"], "Burner", "{body}");
    assert_eq!(body["alerts"][0]["labels"]["severity"], "warning", "{body}");
    assert!(body["alerts"][0]["annotations"]["summary"].as_str().is_some_and(|s| s.contains(" burns ")), "{body}");
    drop(first);
    wait_until("Alertmanager's resolved notification", Duration::from_secs(30), || {
        statuses().contains(&("resolved".to_string(), pid.clone()))
    });

    let out = proctor(&["alerts", "silence", "Burner", "--for", "1h", "--url", &format!("http://{addr}")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    wait_until("the silence applied", Duration::from_secs(10), || {
        alerts(&addr)["silences"].as_array().is_some_and(|s| s.len() == 1)
    });
    let second = burner(&tag);
    let pid2 = second.0.id().to_string();
    wait_until("the second firing logged", Duration::from_secs(20), || {
        log_events(&data).iter().any(|e| e["state"] == "firing" && e["labels"]["pid"] == pid2.as_str())
    });
    // Several resends later, Alertmanager has not heard of it, and lists no alert for it.
    std::thread::sleep(Duration::from_secs(5));
    assert!(!statuses().iter().any(|(_, p)| *p == pid2), "{:?}", statuses());
    let listed = body_json(&http_get(&am_url, "/api/v2/alerts"));
    assert!(!listed.to_string().contains(&format!("\"pid\":\"{pid2}\"")), "{listed}");
    let status = alerts(&addr);
    let am_stats = &status["receivers"][0];
    assert!(am_stats["delivered_total"].as_u64() >= Some(2), "{am_stats}");
    assert_eq!(am_stats["given_up_total"], 0, "{am_stats}");
    drop(second);
    drop(am);
}

/// `proctor alerts test` over a real recording: a process that lived for part of it makes the
/// rule fire once and resolve when it went; a rule that never held says so.
#[test]
fn alerts_test_replays_a_recording_and_says_when_rules_fired_and_resolved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let tag = format!("bt{}", std::process::id());
    let mut rec = Guard(
        proctor_command()
            .args(["record", "--dir", data.to_str().expect("utf-8"), "--interval", "200ms", "--count", "25"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("record"),
    );
    std::thread::sleep(Duration::from_millis(1200));
    let p = Flapper::start(&tag);
    std::thread::sleep(Duration::from_millis(1500));
    drop(p);
    let status = super::bounded::wait_at_most(&mut rec.0, "record with a count", Duration::from_secs(120));
    assert!(status.success(), "{status:?}");
    let rules = rules_file(
        dir.path(),
        &format!(
            "groups:\n  - name: g\n    rules:\n      - alert: Lived\n        expr: process{{cmdline=~\"flapper-{tag} .*\"}}.rss > 0B\n      - alert: Never\n        expr: host.memory.total < 1KiB\n"
        ),
    );
    let out = proctor(&["alerts", "test", &rules, "--dir", data.to_str().expect("utf-8"), "--format", "json"]);
    let v = super::json(&out);
    assert_eq!(v["samples"], 25, "{v}");
    let lived = &v["rules"][0];
    assert_eq!((lived["rule"].as_str(), lived["fired"].as_u64()), (Some("Lived"), Some(1)), "{v}");
    let period = &lived["periods"][0];
    assert!(period["resolved_at"].is_string(), "{period}");
    // Fired for part of the 1.5 s the flapper lived, as the 200 ms samples saw it: more than
    // nothing, never much past its life. (Not at least 0.6 s: on a loaded machine the first
    // sample with its command line came 1.4 s into its life, and the period was 0.5999 s.)
    let secs = period["seconds"].as_f64().expect("seconds");
    assert!(secs > 0.0 && secs <= 2.6, "fired for {secs} s: {period}");
    assert_eq!(v["rules"][1]["fired"], 0);
    let text = proctor(&["alerts", "test", &rules, "--dir", data.to_str().expect("utf-8")]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Lived (none): fired 1 time") && text.contains("Never (none): never fired"), "{text}");
}

/// `proctor top --rules`: the screen's header says what fires.
#[test]
fn top_with_rules_says_what_fires_in_its_header() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: Anything\n        expr: count(process) >= 1\n      - alert: Nothing\n        expr: count(process) < 1\n",
    );
    let out = proctor(&["top", "--once", "--size", "110x14", "--interval", "200ms", "--rules", &rules]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(screen.lines().any(|l| l == "Alerts 1 firing: Anything (2 rules)"), "{screen}");
}

/// `proctor report` over a recording made by `serve --rules`: the alert's firing and resolution
/// are on its timeline (listed, in the JSON, and as a band on the host plot).
#[test]
fn report_shows_the_alerts_that_fired_in_its_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tag = format!("rp{}", std::process::id());
    let rules = rules_file(
        dir.path(),
        &format!(
            "groups:\n  - name: g\n    rules:\n      - alert: Visitor\n        expr: process{{cmdline=~\"flapper-{tag} .*\"}}.rss > 0B\n        annotations:\n          summary: \"{{{{ $labels.name }}}} came by\"\n"
        ),
    );
    let (serve_guard, _addr, data) = serve_rules(dir.path(), &rules, "200ms", &[]);
    let d = data.to_str().expect("utf-8");
    let stored = || {
        let out = proctor(&["report", "--dir", d, "--from", "2 min ago", "--format", "json"]);
        out.status.success()
    };
    // The alert fires inside the recording: a sample is stored before the process comes.
    wait_until("a stored sample", Duration::from_secs(30), stored);
    let p = Flapper::start(&tag);
    wait_until("firing", Duration::from_secs(10), || log_events(&data).iter().any(|e| e["state"] == "firing"));
    std::thread::sleep(Duration::from_millis(1000));
    drop(p);
    wait_until("resolved", Duration::from_secs(10), || log_events(&data).iter().any(|e| e["state"] == "resolved"));
    drop(serve_guard);
    let plots = dir.path().join("plots");
    std::fs::create_dir(&plots).expect("plots dir");
    let out = proctor(&["report", "--dir", d, "--from", "2 min ago", "--out", plots.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let section = text.split("alerts in the range").nth(1).unwrap_or_else(|| panic!("no alerts section: {text}"));
    let lines: Vec<&str> = section.lines().filter(|l| l.contains("Visitor")).collect();
    assert_eq!(lines.len(), 2, "{section}");
    assert!(lines[0].contains(" firing ") && lines[0].contains("came by"), "{section}");
    assert!(lines[1].contains(" resolved ") && lines[1].contains("[gone]"), "{section}");
    let svg = std::fs::read_to_string(plots.join("report.svg")).expect("report.svg");
    assert!(svg.contains("alerts firing (red bands): Visitor"), "the plot names no alert");
    let v = super::json(&proctor(&["report", "--dir", d, "--from", "2 min ago", "--format", "json"]));
    let states: Vec<&str> =
        v["alerts"]["events"].as_array().expect("events").iter().filter_map(|e| e["state"].as_str()).collect();
    assert_eq!(states, ["firing", "resolved"], "{}", v["alerts"]);
}

/// `serve --statsd --rules`: a timer's upper_90 past 250 ms fires the rule, in seconds as the
/// literal says; a rules file naming statsd series without a statsd server says they never fire.
#[test]
fn a_statsd_timer_past_its_threshold_fires() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = rules_file(
        dir.path(),
        "groups:\n  - name: api\n    rules:\n      - alert: SlowApi\n        expr: statsd.timer{key=\"api.latency\"}.upper_90 > 250ms\n        annotations:\n          summary: \"p90 {{ $value }}\"\n",
    );
    let udp_port = std::net::UdpSocket::bind("127.0.0.1:0").expect("probe").local_addr().expect("addr").port();
    let udp = format!("127.0.0.1:{udp_port}");
    let (_serve, addr, data) = serve_rules(
        dir.path(),
        &rules,
        "200ms",
        &["--statsd", "--udp", &udp, "--admin", "off", "--flush-interval", "300ms"],
    );
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").expect("sender");
    let firing = || log_events(&data).into_iter().find(|e| e["state"] == "firing");
    // Fast requests first: nothing fires.
    for _ in 0..8 {
        sender.send_to(b"api.latency:20|ms\napi.latency:30|ms", &udp).expect("send");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(firing().is_none(), "{:?}", firing());
    wait_until("the slow flush firing the rule", Duration::from_secs(15), || {
        sender.send_to(b"api.latency:400|ms\napi.latency:420|ms", &udp).expect("send");
        firing().is_some()
    });
    let e = firing().expect("firing");
    assert!(e["annotations"]["summary"].as_str().is_some_and(|s| s.starts_with("p90 4")), "{e}");
    assert!(alerts(&addr)["notes"].as_array().is_some_and(Vec::is_empty));

    // The same rules on a serve without --statsd: said, never fired.
    let other = tempfile::tempdir().expect("tempdir");
    let (_plain, addr2, _) = serve_rules(other.path(), &rules, "200ms", &[]);
    wait_until("an evaluation", Duration::from_secs(10), || alerts(&addr2)["evaluations_total"].as_u64() >= Some(2));
    let notes = alerts(&addr2)["notes"].to_string();
    assert!(notes.contains("no statsd server"), "{notes}");
}

/// Issue 33 item 14: a process names itself with terminal escapes (`\e]0;PWNED\a` sets the
/// terminal's title); `alerts status` printed it raw to the operator's terminal. Every control
/// character of what the agent sends is shown as `?`.
#[test]
fn alerts_status_prints_a_hostile_process_name_without_its_escapes() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A child of ours that renames itself (prctl PR_SET_NAME), then sleeps.
    // Ended by its guard (by its pid), and on its own after 120 s.
    let _evil = super::Guard(
        Command::new("python3")
            .args([
                "-c",
                "import ctypes,time; ctypes.CDLL(None).prctl(15, b'\\x1b]0;PWNED\\x07', 0, 0, 0); time.sleep(120)",
            ])
            .spawn()
            .expect("python3"),
    );
    let rules = rules_file(
        dir.path(),
        "groups:\n  - name: g\n    rules:\n      - alert: Pwned\n        expr: process{name=~\".*PWNED.*\"}.rss_bytes > 0\n",
    );
    let (_serve, addr, _data) = serve_rules(dir.path(), &rules, "200ms", &[]);
    wait_until("the hostile process firing", Duration::from_secs(20), || alerts(&addr)["firing"] == 1);
    let out = proctor(&["alerts", "status", "--url", &format!("http://{addr}")]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("PWNED"), "the instance is listed: {said}");
    assert!(!said.chars().any(|c| c.is_control() && c != '\n'), "no control characters: {said:?}");
}

/// `alerts status` against an agent that answers a byte at a time (issue 33 item 16) gives up
/// within its overall deadline (10 s, connect to the body's end) with a clear error, instead of
/// reading for as long as the bytes keep coming.
#[test]
fn alerts_status_has_an_overall_deadline() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else { return };
        let mut head = [0u8; 4096];
        let _ = stream.read(&mut head);
        let _ =
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n");
        // At most 120 s of a byte every 200 ms, or until the client has gone.
        for _ in 0..600 {
            if stream.write_all(b" ").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let mut child = proctor_command()
        .args(["alerts", "status", "--url", &format!("http://{addr}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("proctor");
    let mut stderr = child.stderr.take().expect("piped");
    let mut said = String::new();
    // Bounded: stderr ends when proctor does; a reader past 60 s means it never gave up.
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = stderr.read_to_string(&mut said);
        let _ = done.send(said);
    });
    let said = ended.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
        let _ = child.kill();
        panic!("alerts status still reading after 60 s");
    });
    let status = child.wait().expect("wait");
    assert!(!status.success(), "{said}");
    assert!(
        said.contains("is `proctor serve` running there?") && said.contains("no whole answer within 10s"),
        "{said}"
    );
}
