//! What operators deploy, tried for real: the container image built and run (`deploy/image.rs`), and the series
//! the Grafana dashboard and the alerting rules query, found under those names and labels in the services' own
//! metrics while they work (`deploy/series.rs`).

mod deploy {
    mod image;
    mod series;
}
