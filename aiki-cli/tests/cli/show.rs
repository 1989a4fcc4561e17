//! `aiki runs show`: wait timeouts listed as such, failures named with the command that
//! retries them, task inputs on request, and nothing a terminal would act on.

use aiki_tests::Backend;
use serde_json::Value;

use crate::scenes::scene;
use crate::support::{aiki, has_control, on};

async fn shows_wait_timeouts_failures_and_inputs(backend: Backend) {
    let s = scene(backend).await;
    let table = |id: aiki::RunId, more: &[&str]| {
        let id = id.to_string();
        let shown = aiki(
            &s.url,
            &[&["runs", "show", &id, "-o", "table"], more].concat(),
        );
        assert_eq!(shown.code, 0, "{}", shown.stderr);
        println!("{}", shown.stdout);
        assert!(!has_control(&shown.stdout), "{:?}", shown.stdout);
        shown.stdout
    };

    // An event wait's timeout is the wait's, not a sleep; the raw names stay in JSON.
    let timeouts = table(s.timeouts, &[]);
    assert!(
        timeouts.contains("WAIT TIMEOUT")
            && timeouts.contains("timeout of the wait on event `nudge`"),
        "{timeouts}"
    );
    assert!(
        !timeouts.contains("SLEEP "),
        "no sleep of its own: {timeouts}"
    );
    assert!(
        timeouts.contains("waiting on event `nudge`, times out in 2 h 59 min"),
        "{timeouts}"
    );
    let shown = on(&s.url, "show", s.timeouts, "json").json();
    let sleeps: Vec<&str> = shown["sleeps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|sleep| sleep["name"].as_str().unwrap())
        .collect();
    assert_eq!(sleeps, ["\u{1}event:nudge", "\u{1}event:nudge"], "{shown}");
    assert_eq!(shown["events"][0]["name"], "nudge");
    assert_eq!(shown["events"][0]["timed_out"], true);

    // A child wait's timeout, and its queue.
    let impatient = table(s.impatient, &[]);
    assert!(
        impatient.contains("timeout of the wait on child `cli-unserved:1:"),
        "{impatient}"
    );
    assert!(
        impatient.contains("(wait on child cli-unserved:1:"),
        "{impatient}"
    );

    // A run failed by its child: the command that retries both.
    let orphaned = table(s.orphaned, &[]);
    let command = format!("aiki runs retry {} --rerun-child", s.orphaned);
    assert!(
        orphaned.contains("its child run") && orphaned.contains(&command),
        "{orphaned}"
    );
    let shown = on(&s.url, "show", s.orphaned, "json").json();
    assert_eq!(shown["retry_command"], command.as_str(), "{shown}");
    assert!(shown["doing"].as_str().unwrap().contains(&command));
    // Its child's start is listed with how the child ended, not as a child `completed`.
    let start = orphaned
        .lines()
        .find(|line| line.starts_with("cli-fails:1:"))
        .expect("the child's start");
    assert!(
        start.contains("  child  child failed  ") && !start.contains("completed"),
        "{start}"
    );
    assert_eq!(shown["entries"][0]["state"], "child failed", "{shown}");
    assert_eq!(
        shown["entries"][0]["status"], "completed",
        "the record as stored"
    );

    // A run failed by a task: the failing call, and the plain command; the error's escapes
    // are shown, not sent.
    let broken = table(s.broken, &[]);
    assert!(broken.contains("at call `cli-broken:"), "{broken}");
    assert!(
        broken.contains(&format!("`aiki runs retry {}`", s.broken)),
        "{broken}"
    );
    assert!(broken.contains("\u{241b}[31mHTTP 503"), "{broken}");
    let list = aiki(&s.url, &["runs", "list", "-o", "table"]);
    assert!(!has_control(&list.stdout), "{:?}", list.stdout);
    let result = aiki(&s.url, &["runs", "result", &s.broken.to_string()]);
    let line = result.failed(3);
    assert!(!has_control(line) && line.contains("HTTP 503"), "{line:?}");
    let shown = on(&s.url, "show", s.broken, "json").json();
    assert!(
        shown["run"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("\u{1b}[31m"),
        "JSON keeps the text as it is: {shown}"
    );

    // Task inputs: always in JSON (a large one noted, not recorded), in the table on request.
    let shown = on(&s.url, "show", s.big, "json").json();
    let inputs: Vec<&Value> = shown["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| &entry["input"])
        .collect();
    assert!(inputs.contains(&&Value::from("hi")), "{inputs:?}");
    assert!(
        inputs
            .iter()
            .any(|input| input["aiki_input_omitted_bytes"].as_u64() > Some(70_000)),
        "{inputs:?}"
    );
    let plain = table(s.big, &[]);
    assert!(!plain.contains("INPUT"), "{plain}");
    let with_inputs = table(s.big, &["--inputs"]);
    assert!(
        with_inputs.contains("INPUT") && with_inputs.contains("\"hi\""),
        "{with_inputs}"
    );
    assert!(with_inputs.contains("(not recorded: 7"), "{with_inputs}");
    let big = s.big.to_string();
    let without = aiki(
        &s.url,
        &["runs", "show", &big, "-o", "json", "--no-payloads"],
    )
    .json();
    assert!(without["entries"][0].get("input").is_none(), "{without}");

    // Bad input: one line, exit 2.
    let both = aiki(&s.url, &["runs", "show", &big, "--inputs", "--no-payloads"]);
    assert!(both.failed(2).contains("give one"), "{}", both.stderr);
    let valued = aiki(&s.url, &["runs", "show", &big, "--inputs=yes"]);
    valued.failed(2);
}

aiki_tests::on_sql_backends!(shows_wait_timeouts_failures_and_inputs);
