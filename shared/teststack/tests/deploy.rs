//! What operators deploy, tried for real: the container image built and run (`deploy/image.rs`), the series
//! the Grafana dashboard and the alerting rules query, found under those names and labels in the services' own
//! metrics while they work (`deploy/series.rs`), and one placement followed as one trace (`deploy/traces.rs`).

mod deploy {
    mod image;
    mod series;
    mod traces;
}
