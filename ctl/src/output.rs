//! Printing records: each is first written as its proto3 JSON (the contracts' own mapping, so JSON and YAML output
//! follow the `.proto` files without hand-written serde), and a table picks its columns from that JSON by path.

use prost::{Message, Name};
use serde_json::Value;

use crate::cli::Output;
use crate::error::CtlError;

/// A table column: its header and where its value is in a record's JSON (`a.b`; `a[].b` joins b of each of a).
pub struct Column(pub &'static str, pub &'static str);

/// A record as proto3 JSON.
pub fn json_of<M: Message + Name>(record: &M) -> Result<Value, CtlError> {
    let bytes = berth_proto::json::to_json(record).map_err(|err| CtlError::Config(err.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|err| CtlError::Config(err.to_string()))
}

/// Prints `records` as `output` asks: a table of `columns`, or each record whole (a JSON array, a YAML list).
pub fn print_list<M: Message + Name>(output: Output, records: &[M], columns: &[Column]) -> Result<(), CtlError> {
    let values = records.iter().map(json_of).collect::<Result<Vec<_>, _>>()?;
    match output {
        Output::Table => print!("{}", table(&values, columns)),
        Output::Json => println!("{}", pretty(&Value::Array(values))),
        Output::Yaml => print!("{}", yaml(&Value::Array(values))?),
    }
    Ok(())
}

/// Prints one record whole; as a table, one line per field.
pub fn print_one<M: Message + Name>(output: Output, record: &M) -> Result<(), CtlError> {
    print_value(output, &json_of(record)?)
}

/// Prints a record already as JSON (one joined from several answers), as [`print_one`] does.
pub fn print_value(output: Output, value: &Value) -> Result<(), CtlError> {
    match output {
        Output::Json => println!("{}", pretty(value)),
        Output::Yaml | Output::Table => print!("{}", yaml(value)?),
    }
    Ok(())
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

fn yaml(value: &Value) -> Result<String, CtlError> {
    serde_yaml::to_string(value).map_err(|err| CtlError::Config(err.to_string()))
}

/// The text at `path` in `value`: strings bare, lists joined with commas, absent as `-`.
pub fn cell(value: &Value, path: &str) -> String {
    let mut found = vec![value];
    for step in path.split('.') {
        let (name, each) = match step.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (step, false),
        };
        found = found
            .into_iter()
            .filter_map(|v| v.get(name))
            .flat_map(|v| match (each, v) {
                (true, Value::Array(items)) => items.iter().collect(),
                _ => vec![v],
            })
            .collect();
    }
    let texts: Vec<String> = found
        .into_iter()
        .map(|v| match v {
            Value::String(text) => text.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        })
        .collect();
    if texts.is_empty() { "-".into() } else { texts.join(",") }
}

/// `rows` as aligned columns under their headers.
pub fn table(rows: &[Value], columns: &[Column]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| columns.iter().map(|Column(_, path)| cell(row, path)).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, Column(header, _))| {
            cells
                .iter()
                .map(|row| row[i].chars().count())
                .chain([header.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |texts: Vec<&str>| {
        let padded: Vec<String> = texts
            .iter()
            .zip(&widths)
            .map(|(text, width)| format!("{text:<width$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(columns.iter().map(|Column(header, _)| *header).collect());
    for row in &cells {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_follow_paths_into_lists_and_mark_what_is_absent() {
        let fleet = json!({"fleetId": "arena", "locations": [{"location": "eu"}, {"location": "us"}], "n": 3});
        assert_eq!(cell(&fleet, "fleetId"), "arena");
        assert_eq!(cell(&fleet, "locations[].location"), "eu,us");
        assert_eq!(cell(&fleet, "n"), "3");
        assert_eq!(cell(&fleet, "status"), "-");
    }

    #[test]
    fn tables_align_their_columns() {
        let rows = [json!({"a": "long value", "b": "x"}), json!({"a": "s"})];
        let text = table(&rows, &[Column("A", "a"), Column("B", "b")]);
        assert_eq!(text, "A           B\nlong value  x\ns           -\n");
    }
}
