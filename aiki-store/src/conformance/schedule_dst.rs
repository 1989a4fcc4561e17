//! The daylight-saving check of schedules: both changes in three time zones, fired by the
//! sweep on the store's clock.

use super::schedules::{create, cron, definition, delete, lease, log, of_kind};
use super::{SWEEPS, namespace};
use crate::schedule::fire_due;
use crate::{Millis, OverlapPolicy, ScheduleLogKind, Store};

/// RFC 3339 to ms.
fn at(text: &str) -> Millis {
    chrono::DateTime::parse_from_rfc3339(text)
        .expect("a time")
        .timestamp_millis()
}

/// Both daylight-saving changes in Europe/Berlin, America/New_York and Australia/Lord_Howe
/// (a 30-minute shift), fired by the sweep skipping from one occurrence to the next by the
/// schedule's own next time: a fixed local time that does not exist fires once at the first
/// instant after the gap, one that exists twice fires once (the first), and a wildcard hour
/// follows absolute time (both 02:00s at fall-back).
pub async fn check_daylight_saving_changes(store: &dyn Store) {
    let _sweep = SWEEPS.lock().await;
    let cases = [
        // Berlin, spring forward 2027-03-28 02:00 CET -> 03:00 CEST.
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2027-03-26T12:00:00Z",
            vec![
                "2027-03-27T01:30:00Z",
                "2027-03-28T01:00:00Z",
                "2027-03-29T00:30:00Z",
            ],
        ),
        // Berlin, fall back 2027-10-31 03:00 CEST -> 02:00 CET.
        (
            "30 2 * * *",
            "Europe/Berlin",
            "2027-10-29T12:00:00Z",
            vec![
                "2027-10-30T00:30:00Z",
                "2027-10-31T00:30:00Z",
                "2027-11-01T01:30:00Z",
            ],
        ),
        (
            "0 * * * *",
            "Europe/Berlin",
            "2027-10-30T22:30:00Z",
            vec![
                "2027-10-30T23:00:00Z",
                "2027-10-31T00:00:00Z",
                "2027-10-31T01:00:00Z",
                "2027-10-31T02:00:00Z",
            ],
        ),
        // A stepped minute follows absolute time through the repeated hour.
        (
            "*/15 * * * *",
            "Europe/Berlin",
            "2027-10-31T00:20:00Z",
            vec![
                "2027-10-31T00:30:00Z",
                "2027-10-31T00:45:00Z",
                "2027-10-31T01:00:00Z",
                "2027-10-31T01:15:00Z",
                "2027-10-31T01:30:00Z",
                "2027-10-31T01:45:00Z",
                "2027-10-31T02:00:00Z",
            ],
        ),
        // A fixed hour with two minutes in the gap: once, right after it.
        (
            "0,30 2 * * *",
            "Europe/Berlin",
            "2027-03-27T12:00:00Z",
            vec![
                "2027-03-28T01:00:00Z",
                "2027-03-29T00:00:00Z",
                "2027-03-29T00:30:00Z",
            ],
        ),
        // New York, spring forward 2027-03-14 02:00 EST -> 03:00 EDT.
        (
            "30 2 * * *",
            "America/New_York",
            "2027-03-12T12:00:00Z",
            vec![
                "2027-03-13T07:30:00Z",
                "2027-03-14T07:00:00Z",
                "2027-03-15T06:30:00Z",
            ],
        ),
        // New York, fall back 2027-11-07 02:00 EDT -> 01:00 EST.
        (
            "30 1 * * *",
            "America/New_York",
            "2027-11-05T12:00:00Z",
            vec![
                "2027-11-06T05:30:00Z",
                "2027-11-07T05:30:00Z",
                "2027-11-08T06:30:00Z",
            ],
        ),
        (
            "0 * * * *",
            "America/New_York",
            "2027-11-07T04:30:00Z",
            vec![
                "2027-11-07T05:00:00Z",
                "2027-11-07T06:00:00Z",
                "2027-11-07T07:00:00Z",
            ],
        ),
        // Lord Howe, spring forward 2027-10-03 02:00 (+10:30) -> 02:30 (+11).
        (
            "15 2 * * *",
            "Australia/Lord_Howe",
            "2027-10-01T00:00:00Z",
            vec![
                "2027-10-01T15:45:00Z",
                "2027-10-02T15:30:00Z",
                "2027-10-03T15:15:00Z",
            ],
        ),
        // Lord Howe, fall back 2027-04-04 02:00 (+11) -> 01:30 (+10:30): a stepped hour
        // fires at both 01:30s.
        (
            "*/30 * * * *",
            "Australia/Lord_Howe",
            "2027-04-03T14:10:00Z",
            vec![
                "2027-04-03T14:30:00Z",
                "2027-04-03T15:00:00Z",
                "2027-04-03T15:30:00Z",
                "2027-04-03T16:00:00Z",
            ],
        ),
        // Lord Howe, fall back 2027-04-04 02:00 (+11) -> 01:30 (+10:30).
        (
            "45 1 * * *",
            "Australia/Lord_Howe",
            "2027-04-02T00:00:00Z",
            vec![
                "2027-04-02T14:45:00Z",
                "2027-04-03T14:45:00Z",
                "2027-04-04T15:15:00Z",
            ],
        ),
    ];
    for (expression, timezone, created, expected) in cases {
        let case = format!("`{expression}` in {timezone}");
        let ns = namespace();
        let mut def = definition(&ns, cron(expression, timezone));
        def.overlap = OverlapPolicy::Allow;
        let created = at(created);
        let record = create(store, def, created).await;
        let lease = lease(store, "dst", created).await;
        for _ in &expected {
            // Skip to the next occurrence by the schedule's own record, as TestEnv does.
            let next = store
                .schedule(&record.name)
                .await
                .expect("read")
                .fire_at()
                .expect("a next occurrence");
            fire_due(store, &lease, next, 1_000).await.expect("sweep");
        }
        let fired: Vec<_> = of_kind(&log(store, &record.name).await, ScheduleLogKind::Fired)
            .iter()
            .filter_map(|row| row.nominal_at)
            .collect();
        let expected: Vec<_> = expected.iter().map(|text| at(text)).collect();
        assert_eq!(fired, expected, "{case}");
        delete(store, &record.name).await;
    }
}
