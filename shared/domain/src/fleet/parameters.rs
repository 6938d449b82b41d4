//! Provisioner parameters: each provisioner's settings of a fleet (`launch_configuration.provisioner_parameters`),
//! read from the contract's free-form `Struct` into a typed form. The same reading checks a fleet when it is created
//! or updated, so that a malformed parameter is refused with the field it names instead of failing every launch,
//! and gives the provisioner what it launches with.

use std::collections::BTreeMap;

use berth_proto::fleet::v1 as pb;
use prost_types::value::Kind;
use prost_types::{Struct, Value};

/// Where a fleet's provisioner parameters are, for the field an error names.
pub const FIELD: &str = "launch_configuration.provisioner_parameters";

/// A malformed parameter: the field (under `FIELD`) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{FIELD}.{field} {problem}")]
pub struct BadParameter {
    pub field: String,
    pub problem: String,
}

impl BadParameter {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> BadParameter {
        BadParameter {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// Checks a launch configuration's parameters as `provisioner` reads them. A provisioner this build does not
/// know reads none (the fleet check refuses an unconfigured provisioner before this).
pub fn check(provisioner: &str, launch: &pb::ServerLaunchConfiguration) -> Result<(), BadParameter> {
    match provisioner {
        "process" => ProcessParameters::of(launch).map(drop),
        "docker" => DockerParameters::of(launch).map(drop),
        "http" => passed_through(launch),
        _ => Ok(()),
    }
}

/// How deep the `http` provisioner's parameters may nest: far beyond any real settings, well within what JSON
/// parsers accept (serde_json stops at 128).
pub const PASSED_THROUGH_DEPTH_MAX: usize = 32;

/// The `http` provisioner's parameters: any object, passed through unread to the operator's hosting API, which
/// interprets it. Checked only for what would keep it from reaching the API as JSON: every number finite, nesting
/// at most `PASSED_THROUGH_DEPTH_MAX` deep.
pub fn passed_through(launch: &pb::ServerLaunchConfiguration) -> Result<(), BadParameter> {
    fields(launch).try_for_each(|(name, value)| json_ready(name, value, 1))
}

fn json_ready(path: &str, value: &Value, depth: usize) -> Result<(), BadParameter> {
    if depth > PASSED_THROUGH_DEPTH_MAX {
        return Err(BadParameter::new(
            path,
            format!("nests deeper than {PASSED_THROUGH_DEPTH_MAX} levels"),
        ));
    }
    match &value.kind {
        Some(Kind::NumberValue(n)) if !n.is_finite() => Err(BadParameter::new(
            path,
            "must be a finite number (JSON has no NaN or infinity)",
        )),
        Some(Kind::StructValue(object)) => object
            .fields
            .iter()
            .try_for_each(|(key, value)| json_ready(&format!("{path}.{key}"), value, depth + 1)),
        Some(Kind::ListValue(list)) => list
            .values
            .iter()
            .enumerate()
            .try_for_each(|(i, value)| json_ready(&format!("{path}[{i}]"), value, depth + 1)),
        _ => Ok(()),
    }
}

/// The `process` provisioner's parameters: `env`, an object of extra environment variables (string values), and
/// `working_directory`, where the processes start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessParameters {
    pub env: BTreeMap<String, String>,
    pub working_directory: Option<String>,
}

impl ProcessParameters {
    pub fn of(launch: &pb::ServerLaunchConfiguration) -> Result<ProcessParameters, BadParameter> {
        let mut parameters = ProcessParameters::default();
        for (name, value) in fields(launch) {
            match name.as_str() {
                "env" => parameters.env = strings(name, value)?,
                "working_directory" => parameters.working_directory = Some(string(name, value)?.to_owned()),
                _ => return Err(unknown(name, "env (object of strings), working_directory (string)")),
            }
        }
        Ok(parameters)
    }
}

/// The `docker` provisioner's parameters: `image` (required), the image each instance's container runs; `env`, an
/// object of extra environment variables (string values); `cpus`, the CPUs the container may use (fractions allowed);
/// `memory_mb`, its memory limit; `network_mode`, the Docker network it joins (`host` unless set, so that the game
/// port the provisioner picks is the host's and the SDK endpoint is reachable as on the host); `user`, who its
/// processes run as.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DockerParameters {
    pub image: String,
    pub env: BTreeMap<String, String>,
    pub cpus: Option<f64>,
    pub memory_mb: Option<u64>,
    pub network_mode: String,
    pub user: Option<String>,
}

/// Most CPUs a container may be given.
const MAX_CPUS: f64 = 1024.0;
/// Least and most memory a container may be given, MiB (Docker refuses less than 6 MiB).
const MEMORY_MB: (u64, u64) = (6, 16 << 20);

impl DockerParameters {
    pub fn of(launch: &pb::ServerLaunchConfiguration) -> Result<DockerParameters, BadParameter> {
        let mut parameters = DockerParameters {
            network_mode: "host".into(),
            ..DockerParameters::default()
        };
        for (name, value) in fields(launch) {
            match name.as_str() {
                "image" => parameters.image = string(name, value)?.to_owned(),
                "env" => parameters.env = strings(name, value)?,
                "cpus" => parameters.cpus = Some(positive(name, value, MAX_CPUS)?),
                "memory_mb" => parameters.memory_mb = Some(number(name, value, MEMORY_MB.0, MEMORY_MB.1)?),
                "network_mode" => parameters.network_mode = string(name, value)?.to_owned(),
                "user" => parameters.user = Some(string(name, value)?.to_owned()),
                _ => {
                    return Err(unknown(
                        name,
                        "image (string), env (object of strings), cpus (number), memory_mb (whole number), \
                         network_mode (string), user (string)",
                    ));
                }
            }
        }
        if parameters.image.trim().is_empty() {
            return Err(BadParameter::new(
                "image",
                "is required: the image each instance's container runs",
            ));
        }
        if parameters.network_mode.trim().is_empty() {
            return Err(BadParameter::new(
                "network_mode",
                "must name a Docker network (host unless set)",
            ));
        }
        Ok(parameters)
    }
}

/// The parameters given, by name; none when unset.
pub fn fields(launch: &pb::ServerLaunchConfiguration) -> impl Iterator<Item = (&String, &Value)> {
    launch
        .provisioner_parameters
        .iter()
        .flat_map(|s: &Struct| s.fields.iter())
}

/// A parameter this provisioner does not read; `known` lists those it does, with their types.
pub fn unknown(name: &str, known: &str) -> BadParameter {
    BadParameter::new(
        name,
        format!("is not a parameter of this provisioner (it reads: {known})"),
    )
}

/// A string parameter.
pub fn string<'a>(name: &str, value: &'a Value) -> Result<&'a str, BadParameter> {
    match &value.kind {
        Some(Kind::StringValue(text)) => Ok(text),
        _ => Err(BadParameter::new(name, "must be a string")),
    }
}

/// A whole-number parameter within `min..=max`.
pub fn number(name: &str, value: &Value, min: u64, max: u64) -> Result<u64, BadParameter> {
    match &value.kind {
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && *n >= min as f64 && *n <= max as f64 => Ok(*n as u64),
        _ => Err(BadParameter::new(
            name,
            format!("must be a whole number from {min} to {max}"),
        )),
    }
}

/// A number parameter above 0 and at most `max`, fractions allowed.
pub fn positive(name: &str, value: &Value, max: f64) -> Result<f64, BadParameter> {
    match &value.kind {
        Some(Kind::NumberValue(n)) if *n > 0.0 && *n <= max => Ok(*n),
        _ => Err(BadParameter::new(
            name,
            format!("must be a number above 0 and at most {max}"),
        )),
    }
}

/// An object parameter whose values are all strings.
pub fn strings(name: &str, value: &Value) -> Result<BTreeMap<String, String>, BadParameter> {
    let Some(Kind::StructValue(object)) = &value.kind else {
        return Err(BadParameter::new(name, "must be an object of strings"));
    };
    object
        .fields
        .iter()
        .map(|(key, value)| Ok((key.clone(), string(&format!("{name}.{key}"), value)?.to_owned())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(parameters: &[(&str, Kind)]) -> pb::ServerLaunchConfiguration {
        pb::ServerLaunchConfiguration {
            launch_path: "/bin/game".into(),
            parameters: String::new(),
            provisioner_parameters: Some(Struct {
                fields: parameters
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Value { kind: Some(v.clone()) }))
                    .collect(),
            }),
        }
    }

    fn object(fields: &[(&str, Kind)]) -> Kind {
        Kind::StructValue(Struct {
            fields: fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value { kind: Some(v.clone()) }))
                .collect(),
        })
    }

    #[test]
    fn process_parameters_are_read_and_checked() {
        let good = launch(&[
            ("env", object(&[("MAP", Kind::StringValue("dust".into()))])),
            ("working_directory", Kind::StringValue("/srv".into())),
        ]);
        let read = ProcessParameters::of(&good).unwrap();
        assert_eq!(read.env.get("MAP").map(String::as_str), Some("dust"));
        assert_eq!(read.working_directory.as_deref(), Some("/srv"));

        let err = check(
            "process",
            &launch(&[("env", object(&[("MAP", Kind::NumberValue(1.0))]))]),
        )
        .unwrap_err();
        assert_eq!(err.field, "env.MAP");
        assert_eq!(
            err.to_string(),
            "launch_configuration.provisioner_parameters.env.MAP must be a string"
        );
        assert_eq!(
            check("process", &launch(&[("image", Kind::StringValue("x".into()))]))
                .unwrap_err()
                .field,
            "image"
        );
        assert_eq!(
            check("process", &launch(&[("working_directory", Kind::BoolValue(true))]))
                .unwrap_err()
                .field,
            "working_directory"
        );
        assert!(check("process", &pb::ServerLaunchConfiguration::default()).is_ok());
    }

    #[test]
    fn docker_parameters_are_read_and_checked() {
        let good = launch(&[
            ("image", Kind::StringValue("registry.example/arena:42".into())),
            ("env", object(&[("MAP", Kind::StringValue("dust".into()))])),
            ("cpus", Kind::NumberValue(1.5)),
            ("memory_mb", Kind::NumberValue(512.0)),
            ("user", Kind::StringValue("1000:1000".into())),
        ]);
        let read = DockerParameters::of(&good).unwrap();
        assert_eq!(
            read,
            DockerParameters {
                image: "registry.example/arena:42".into(),
                env: [("MAP".to_owned(), "dust".to_owned())].into(),
                cpus: Some(1.5),
                memory_mb: Some(512),
                network_mode: "host".into(),
                user: Some("1000:1000".into()),
            }
        );
        let bridged = launch(&[
            ("image", Kind::StringValue("arena".into())),
            ("network_mode", Kind::StringValue("games".into())),
        ]);
        assert_eq!(DockerParameters::of(&bridged).unwrap().network_mode, "games");

        let field = |parameters: &[(&str, Kind)]| check("docker", &launch(parameters)).unwrap_err().field;
        assert_eq!(field(&[]), "image", "an image is required");
        assert_eq!(field(&[("image", Kind::StringValue(" ".into()))]), "image");
        let image = || ("image", Kind::StringValue("arena".into()));
        assert_eq!(field(&[image(), ("cpus", Kind::NumberValue(0.0))]), "cpus");
        assert_eq!(field(&[image(), ("cpus", Kind::StringValue("2".into()))]), "cpus");
        assert_eq!(field(&[image(), ("memory_mb", Kind::NumberValue(5.0))]), "memory_mb");
        assert_eq!(field(&[image(), ("memory_mb", Kind::NumberValue(64.5))]), "memory_mb");
        assert_eq!(
            field(&[image(), ("network_mode", Kind::StringValue(String::new()))]),
            "network_mode"
        );
        assert_eq!(
            field(&[image(), ("working_directory", Kind::StringValue("/srv".into()))]),
            "working_directory"
        );
        assert_eq!(
            field(&[image(), ("env", object(&[("MAP", Kind::BoolValue(true))]))]),
            "env.MAP"
        );
        assert!(
            check("process", &good).is_err(),
            "each provisioner reads its own parameters"
        );
    }

    #[test]
    fn http_parameters_pass_through_if_json_can_carry_them() {
        let nested = object(&[(
            "ports",
            Kind::ListValue(prost_types::ListValue {
                values: vec![Value {
                    kind: Some(object(&[("udp", Kind::NumberValue(7777.0))])),
                }],
            }),
        )]);
        assert!(
            check(
                "http",
                &launch(&[("anything", nested), ("image", Kind::StringValue("x".into()))])
            )
            .is_ok()
        );
        let infinite = object(&[(
            "ports",
            Kind::ListValue(prost_types::ListValue {
                values: vec![Value {
                    kind: Some(Kind::NumberValue(f64::INFINITY)),
                }],
            }),
        )]);
        let err = check("http", &launch(&[("spec", infinite)])).unwrap_err();
        assert_eq!(err.field, "spec.ports[0]");
        assert!(err.problem.contains("finite"), "{err}");

        let mut deep = Kind::BoolValue(true);
        for _ in 0..PASSED_THROUGH_DEPTH_MAX {
            deep = object(&[("a", deep)]);
        }
        let err = check("http", &launch(&[("a", deep)])).unwrap_err();
        assert_eq!(err.field, format!("a{}", ".a".repeat(PASSED_THROUGH_DEPTH_MAX)));
        assert_eq!(err.problem, "nests deeper than 32 levels");
    }

    #[test]
    fn numbers_must_be_whole_and_in_range() {
        let value = |n: f64| Value {
            kind: Some(Kind::NumberValue(n)),
        };
        assert_eq!(number("cpus", &value(4.0), 1, 64), Ok(4));
        assert!(number("cpus", &value(0.5), 1, 64).is_err());
        assert!(number("cpus", &value(65.0), 1, 64).is_err());
        assert!(
            number(
                "cpus",
                &Value {
                    kind: Some(Kind::StringValue("4".into()))
                },
                1,
                64
            )
            .is_err()
        );
    }
}
