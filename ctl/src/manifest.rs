//! Manifests for `berthctl apply`: YAML (or JSON) documents, each a `kind` and the fields of the request that creates
//! it, named as the contract's proto3 JSON names them (`fleetId`, `launchConfiguration`, …), so that a manifest and
//! the `.proto` files never drift apart. A fleet's documents may also hold its `scalingPolicies`.
//!
//! ```yaml
//! kind: Fleet
//! fleetId: arena-eu
//! provisioner: process
//! launchConfiguration: {launchPath: /opt/game/server}
//! instanceDefinitions: [{instanceType: small}]
//! locations:
//!   - location: eu-west
//!     capacity: {minimumInstances: 0, maximumInstances: 20, desiredInstances: 2}
//! scalingPolicies:
//!   - name: buffer
//!     evaluationIntervalSeconds: 60
//!     buffer: {minimumIdleServers: 2}
//! ---
//! kind: Queue
//! name: arena
//! destinations: [{fleetId: arena-eu}]
//! ```
//!
//! Every file is read and checked — the contract's own limits, as the services check them — before anything is
//! sent, and a problem is named by file, line and field.

use std::path::{Path, PathBuf};

use berth_proto::fleet::v1 as fleet;
use berth_proto::placement::v1 as placement;
use prost::{Message, Name};
use serde_json::Value;
use tonic_types::StatusExt;

use crate::error::CtlError;

/// What a manifest declares.
#[derive(Debug)]
pub enum Declared {
    Fleet {
        fleet: fleet::CreateFleetRequest,
        /// The fields the manifest sets, as written: only these are compared with the fleet as it is.
        written: Value,
        policies: Vec<(fleet::PutScalingPolicyRequest, Value)>,
    },
    Queue {
        queue: placement::CreateQueueRequest,
        written: Value,
    },
}

impl Declared {
    /// `fleet/<id>` or `queue/<name>`.
    pub fn name(&self) -> String {
        match self {
            Declared::Fleet { fleet, .. } => format!("fleet/{}", fleet.fleet_id),
            Declared::Queue { queue, .. } => format!("queue/{}", queue.name),
        }
    }
}

/// One document of a file: its text and the line it starts on.
struct Document<'a> {
    file: &'a Path,
    first_line: usize,
    text: String,
}

impl Document<'_> {
    /// A problem with `field` (a path such as `locations[0].capacity.desired_instances`), at the line where its last
    /// part is written, or where the document starts when it is not written.
    fn problem(&self, field: &str, what: &str) -> CtlError {
        let key = field
            .rsplit('.')
            .next()
            .unwrap_or(field)
            .split('[')
            .next()
            .unwrap_or(field);
        let camel = lower_camel(key);
        let line = self
            .text
            .lines()
            .position(|line| writes_key(line, &camel))
            .map_or(self.first_line, |offset| self.first_line + offset);
        CtlError::Manifest(format!("{}:{line}: {field}: {what}", self.file.display()))
    }
}

/// Whether `line` writes the mapping key `key` (in block or flow style, bare or quoted).
fn writes_key(line: &str, key: &str) -> bool {
    [format!("{key}:"), format!("\"{key}\":"), format!("'{key}':")]
        .iter()
        .any(|written| {
            line.match_indices(written.as_str()).any(|(at, _)| {
                line[..at]
                    .chars()
                    .next_back()
                    .is_none_or(|before| matches!(before, ' ' | '{' | ',' | '-'))
            })
        })
}

/// `snake_case` as proto3 JSON writes it (`lowerCamelCase`); a name without underscores is left as it is.
fn lower_camel(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The manifest files `paths` name: files as given, and the `.yaml`, `.yml` and `.json` files of directories, in
/// name order.
fn files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CtlError> {
    let mut found = Vec::new();
    for path in paths {
        if path.is_dir() {
            let entries =
                std::fs::read_dir(path).map_err(|err| CtlError::Manifest(format!("{}: {err}", path.display())))?;
            let mut inside: Vec<PathBuf> = entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|file| {
                    file.extension()
                        .is_some_and(|ext| ext == "yaml" || ext == "yml" || ext == "json")
                })
                .collect();
            inside.sort();
            found.extend(inside);
        } else {
            found.push(path.clone());
        }
    }
    Ok(found)
}

/// The documents of `text`, split at `---` lines.
fn documents<'a>(file: &'a Path, text: &str) -> Vec<Document<'a>> {
    let mut docs = Vec::new();
    let mut current = Document {
        file,
        first_line: 1,
        text: String::new(),
    };
    for (index, line) in text.lines().enumerate() {
        if line.trim_end() == "---" {
            docs.push(std::mem::replace(
                &mut current,
                Document {
                    file,
                    first_line: index + 2,
                    text: String::new(),
                },
            ));
        } else {
            current.text.push_str(line);
            current.text.push('\n');
        }
    }
    docs.push(current);
    docs.retain(|doc| {
        doc.text
            .lines()
            .any(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
    });
    docs
}

/// Reads and checks every manifest `paths` name; nothing is declared twice.
pub fn read(paths: &[PathBuf]) -> Result<Vec<Declared>, CtlError> {
    let mut declared: Vec<Declared> = Vec::new();
    for file in files(paths)? {
        let text =
            std::fs::read_to_string(&file).map_err(|err| CtlError::Manifest(format!("{}: {err}", file.display())))?;
        for doc in documents(&file, &text) {
            let one = parse(&doc)?;
            if declared.iter().any(|other| other.name() == one.name()) {
                return Err(doc.problem("", &format!("{} is declared twice", one.name())));
            }
            declared.push(one);
        }
    }
    Ok(declared)
}

fn parse(doc: &Document) -> Result<Declared, CtlError> {
    let mut value: Value = serde_yaml::from_str(&doc.text).map_err(|err| {
        let line = err
            .location()
            .map_or(doc.first_line, |at| doc.first_line + at.line() - 1);
        CtlError::Manifest(format!("{}:{line}: {err}", doc.file.display()))
    })?;
    let Some(object) = value.as_object_mut() else {
        return Err(doc.problem("kind", "a document is a mapping with a kind"));
    };
    let kind = object.remove("kind");
    match kind.as_ref().and_then(Value::as_str) {
        Some("Fleet") => {
            let policies = object.remove("scalingPolicies").unwrap_or(Value::Array(Vec::new()));
            let fleet: fleet::CreateFleetRequest = message(doc, &value)?;
            let provisioners = [fleet.provisioner.as_str()];
            checked(doc, berth_domain::fleet::check::check_create(&fleet, &provisioners))?;
            let Value::Array(policies) = policies else {
                return Err(doc.problem("scalingPolicies", "must be a list"));
            };
            let mut read = Vec::new();
            for mut policy in policies {
                if let Some(fields) = policy.as_object_mut() {
                    fields.insert("fleetId".into(), Value::String(fleet.fleet_id.clone()));
                }
                let request: fleet::PutScalingPolicyRequest = message(doc, &policy)?;
                checked(doc, berth_domain::scaling::check::check_put(&request))?;
                read.push((request, policy));
            }
            Ok(Declared::Fleet {
                fleet,
                written: value,
                policies: read,
            })
        }
        Some("Queue") => {
            let queue: placement::CreateQueueRequest = message(doc, &value)?;
            checked(doc, berth_domain::queue::check_create(&queue))?;
            Ok(Declared::Queue { queue, written: value })
        }
        Some(other) => Err(doc.problem("kind", &format!("{other:?} is not Fleet or Queue"))),
        None => Err(doc.problem("kind", "missing: each document says its kind (Fleet or Queue)")),
    }
}

/// `value` read as `M` from proto3 JSON, every field known.
fn message<M: Message + Name + Default>(doc: &Document, value: &Value) -> Result<M, CtlError> {
    let bytes = serde_json::to_vec(value).map_err(|err| doc.problem("", &err.to_string()))?;
    berth_proto::json::from_json_strict(&bytes).map_err(|err| {
        let text = err.to_string();
        // prost-reflect names the field it stopped at in backquotes or quotes.
        let field = text.split(['`', '\'']).nth(1).map(str::to_owned).unwrap_or_default();
        doc.problem(&field, &text)
    })
}

/// A check's refusal as the first of its field violations, at the field's line.
fn checked<T>(doc: &Document, result: Result<T, tonic::Status>) -> Result<(), CtlError> {
    let Err(status) = result else { return Ok(()) };
    let violations = status
        .get_details_bad_request()
        .map(|bad| bad.field_violations)
        .unwrap_or_default();
    match violations.first() {
        Some(first) => {
            let more = violations.len() - 1;
            let also = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            Err(doc.problem(&first.field, &format!("{}{also}", first.description)))
        }
        None => Err(doc.problem("", status.message())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Document<'static> {
        Document {
            file: Path::new("fleets.yaml"),
            first_line: 10,
            text: text.into(),
        }
    }

    #[test]
    fn a_problem_is_placed_at_the_line_of_its_field() {
        let d = doc("kind: Fleet\nfleetId: a\nlocations:\n  - location: x\n    capacity: {desiredInstances: 9}\n");
        let CtlError::Manifest(text) = d.problem("locations[0].capacity", "too big") else {
            panic!()
        };
        assert_eq!(text, "fleets.yaml:14: locations[0].capacity: too big");
        let CtlError::Manifest(text) = d.problem("fleet_id", "bad") else {
            panic!()
        };
        assert_eq!(text, "fleets.yaml:11: fleet_id: bad");
        let CtlError::Manifest(text) = d.problem("locations[0].capacity.desired_instances", "x") else {
            panic!()
        };
        assert!(
            text.starts_with("fleets.yaml:14:"),
            "a key inside a flow mapping: {text}"
        );
    }

    #[test]
    fn documents_split_at_their_separators_and_keep_their_first_line() {
        let docs = documents(Path::new("f"), "# fleets\n---\nkind: Fleet\n---\n\nkind: Queue\n");
        let starts: Vec<usize> = docs.iter().map(|d| d.first_line).collect();
        assert_eq!(starts, [3, 5]);
    }
}
