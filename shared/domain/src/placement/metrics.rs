//! A queue's placement metrics (GetQueueMetrics) from the counts its scripts keep per minute (`queues/lib.lua`):
//! each status and event type by name, first-choice outcomes, lowest latency and price, successes per location, and
//! the waits of fulfilled placements in buckets 10 % wide, whose middles are within 5 % of every wait in them.

use std::collections::{BTreeMap, HashMap};

use berth_proto::placement::v1 as pb;

use crate::game_server::timestamp;
use crate::stored::{FirstChoiceOutcome, PlacementStatus, QueueCount};

/// Ratio of a wait bucket's upper bound to its lower one: bucket `b` holds waits `w` (ms) with
/// `b = floor(ln(w + 1) / ln(WIDTH))`.
const WIDTH: f64 = 1.1;

/// The bucket of a wait, as the scripts count it.
pub fn wait_bucket(wait_ms: u64) -> i64 {
    ((wait_ms as f64 + 1.0).ln() / WIDTH.ln()).floor() as i64
}

/// The middle of a bucket, ms.
fn bucket_middle(bucket: i64) -> u64 {
    (WIDTH.powf(bucket as f64 + 0.5) - 1.0).max(0.0).round() as u64
}

/// What a queue's counts say over a window.
#[derive(Clone, Debug)]
pub struct Counts<'a> {
    pub queue_name: &'a str,
    pub window_start_ms: i64,
    pub now_ms: i64,
    /// Placements PENDING now, the sum of their start times and the oldest's, ms.
    pub pending: u64,
    pub pending_start_sum_ms: i64,
    pub oldest_start_ms: Option<i64>,
    /// The window's minutes' counters, summed.
    pub counters: &'a HashMap<String, u64>,
}

/// The counters as the metrics read them. A fulfilled placement is counted once, as `g:<wait bucket>|<first-choice
/// outcome>|<lowest latency 1 | 0>|<lowest price 1 | 0>|<location>`, which stands for FULFILLED, `w:<bucket>`,
/// `fco:<outcome>`, `ll`, `lp` and `loc:<location>`. Earlier releases counted it as `f:` (the same less the bucket)
/// beside `w:<bucket>`, or by each of those names, which still read.
fn expanded(counters: &HashMap<String, u64>) -> HashMap<String, u64> {
    let mut out: HashMap<String, u64> = HashMap::with_capacity(counters.len());
    let mut add = |name: String, count: u64| *out.entry(name).or_default() += count;
    for (name, &count) in counters {
        let fulfilled = match name.split_at_checked(2) {
            Some(("g:", counted)) => {
                let (bucket, placed) = counted.split_once('|').unwrap_or((counted, ""));
                add(format!("w:{bucket}"), count);
                placed
            }
            Some(("f:", placed)) => placed,
            _ => {
                add(name.clone(), count);
                continue;
            }
        };
        let mut parts = fulfilled.splitn(4, '|');
        let (outcome, lowest_latency, lowest_price, location) =
            (parts.next(), parts.next(), parts.next(), parts.next());
        add(PlacementStatus::Fulfilled.as_str().to_owned(), count);
        add(format!("fco:{}", outcome.unwrap_or_default()), count);
        if lowest_latency == Some("1") {
            add("ll".to_owned(), count);
        }
        if lowest_price == Some("1") {
            add("lp".to_owned(), count);
        }
        add(format!("loc:{}", location.unwrap_or_default()), count);
    }
    out
}

/// The window's metrics.
pub fn queue_metrics(counts: &Counts<'_>) -> pb::QueueMetrics {
    let counters = expanded(counts.counters);
    let counter = |name: &str| counters.get(name).copied().unwrap_or(0);
    let mut waits: BTreeMap<i64, u64> = BTreeMap::new();
    let mut by_location = Vec::new();
    for (name, count) in &counters {
        if let Some(bucket) = name.strip_prefix("w:").and_then(|b| b.parse().ok()) {
            *waits.entry(bucket).or_default() += count;
        } else if let Some(location) = name.strip_prefix("loc:") {
            by_location.push(pb::LocationPlacementCount {
                location: location.to_owned(),
                placements_succeeded: *count,
            });
        }
    }
    by_location.sort_by(|a, b| a.location.cmp(&b.location));
    let fulfilled: u64 = waits.values().sum();
    let percentile = |p: f64| -> u64 {
        let rank = ((fulfilled as f64) * p).ceil().max(1.0) as u64;
        let mut seen = 0;
        waits
            .iter()
            .find(|(_, count)| {
                seen += **count;
                seen >= rank
            })
            .map_or(0, |(bucket, _)| bucket_middle(*bucket))
    };
    let waited = |start_ms: i64| u64::try_from(counts.now_ms - start_ms).unwrap_or(0);
    let average_wait_time_ms = match counts.pending {
        0 => 0,
        n => {
            let mean_start = counts.pending_start_sum_ms / i64::try_from(n).unwrap_or(i64::MAX);
            waited(mean_start)
        }
    };
    let first_choice = |outcome: FirstChoiceOutcome| counter(&format!("fco:{}", outcome.as_str()));
    pb::QueueMetrics {
        queue_name: counts.queue_name.to_owned(),
        window_start_time: Some(timestamp(counts.window_start_ms)),
        window_end_time: Some(timestamp(counts.now_ms)),
        placements_started: counter(QueueCount::Started.as_str()),
        placements_succeeded: counter(PlacementStatus::Fulfilled.as_str()),
        placements_cancelled: counter(PlacementStatus::Cancelled.as_str()),
        placements_failed: counter(PlacementStatus::Failed.as_str()),
        placements_timed_out: counter(PlacementStatus::TimedOut.as_str()),
        queue_depth: u32::try_from(counts.pending).unwrap_or(u32::MAX),
        average_wait_time_ms,
        oldest_wait_time_ms: counts.oldest_start_ms.map_or(0, waited),
        fulfilled_wait_time_p50_ms: if fulfilled == 0 { 0 } else { percentile(0.50) },
        fulfilled_wait_time_p95_ms: if fulfilled == 0 { 0 } else { percentile(0.95) },
        fulfilled_wait_time_p99_ms: if fulfilled == 0 { 0 } else { percentile(0.99) },
        first_choice_out_of_capacity: first_choice(FirstChoiceOutcome::OutOfCapacity),
        first_choice_not_viable: first_choice(FirstChoiceOutcome::NotViable),
        lowest_latency_placements: counter("ll"),
        lowest_price_placements: counter("lp"),
        succeeded_by_location: by_location,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn locations(metrics: &pb::QueueMetrics) -> Vec<(&str, u64)> {
        metrics
            .succeeded_by_location
            .iter()
            .map(|l| (l.location.as_str(), l.placements_succeeded))
            .collect()
    }

    proptest! {
        /// The middle of a wait's bucket is within 5 % of the wait (1 ms for the shortest).
        #[test]
        fn a_bucket_middle_is_within_five_percent_of_every_wait_in_it(wait in 0u64..86_400_000) {
            let middle = bucket_middle(wait_bucket(wait)) as f64;
            let error = (middle - wait as f64).abs();
            prop_assert!(error <= (wait as f64 * 0.05).max(1.0), "{wait} ms lands in a bucket around {middle}");
        }
    }

    #[test]
    fn percentiles_and_counts_come_from_the_minutes() {
        let mut counters = HashMap::new();
        for wait in 1..=100u64 {
            *counters.entry(format!("w:{}", wait_bucket(wait * 10))).or_insert(0) += 1;
        }
        counters.insert("STARTED".to_owned(), 120);
        counters.insert("FULFILLED".to_owned(), 100);
        counters.insert("TIMED_OUT".to_owned(), 3);
        counters.insert("fco:OUT_OF_CAPACITY".to_owned(), 7);
        counters.insert("loc:us-east".to_owned(), 60);
        counters.insert("loc:eu-west".to_owned(), 40);
        let metrics = queue_metrics(&Counts {
            queue_name: "ranked",
            window_start_ms: 0,
            now_ms: 10_000,
            pending: 2,
            pending_start_sum_ms: 9_000 + 7_000,
            oldest_start_ms: Some(7_000),
            counters: &counters,
        });
        assert_eq!(metrics.placements_started, 120);
        assert_eq!(metrics.placements_succeeded, 100);
        assert_eq!(metrics.placements_timed_out, 3);
        assert_eq!(metrics.first_choice_out_of_capacity, 7);
        assert_eq!(
            (
                metrics.queue_depth,
                metrics.average_wait_time_ms,
                metrics.oldest_wait_time_ms
            ),
            (2, 2_000, 3_000)
        );
        let within = |got: u64, want: f64| (got as f64 - want).abs() <= want * 0.05;
        assert!(within(metrics.fulfilled_wait_time_p50_ms, 500.0), "{metrics:?}");
        assert!(within(metrics.fulfilled_wait_time_p95_ms, 950.0), "{metrics:?}");
        assert!(within(metrics.fulfilled_wait_time_p99_ms, 990.0), "{metrics:?}");
        assert_eq!(locations(&metrics), [("eu-west", 40), ("us-east", 60)]);
    }

    #[test]
    fn a_fulfilled_placement_counted_once_reads_as_each_of_its_counts_beside_an_earlier_releases() {
        let counters = HashMap::from([
            ("g:65|OUT_OF_CAPACITY|1|0|us-east".to_owned(), 3),
            ("g:66|TAKEN|0|1|eu|west".to_owned(), 2),
            // Minutes earlier releases counted: the wait apart, or one count per name.
            ("f:OUT_OF_CAPACITY|0|0|us-east".to_owned(), 1),
            ("w:65".to_owned(), 1),
            ("FULFILLED".to_owned(), 4),
            ("fco:OUT_OF_CAPACITY".to_owned(), 1),
            ("ll".to_owned(), 4),
            ("loc:us-east".to_owned(), 4),
        ]);
        let metrics = queue_metrics(&Counts {
            queue_name: "ranked",
            window_start_ms: 0,
            now_ms: 10_000,
            pending: 0,
            pending_start_sum_ms: 0,
            oldest_start_ms: None,
            counters: &counters,
        });
        assert_eq!(metrics.placements_succeeded, 10);
        assert_eq!(metrics.first_choice_out_of_capacity, 5);
        assert_eq!(
            (metrics.lowest_latency_placements, metrics.lowest_price_placements),
            (7, 2)
        );
        assert_eq!(locations(&metrics), [("eu|west", 2), ("us-east", 8)]);
        // Waits of 4 placements in bucket 65 and 2 in 66, wherever they were counted.
        assert_eq!(metrics.fulfilled_wait_time_p50_ms, bucket_middle(65));
        assert_eq!(metrics.fulfilled_wait_time_p95_ms, bucket_middle(66));
    }
}
