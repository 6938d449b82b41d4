//! Agones' beta SDK, counters and lists, over the counters and lists stored with the Berth process: reads are the
//! record as Berth holds it, and every change is one UpdateServer made where they are stored (a CounterChange or a
//! ListChange), so a change racing an allocation's actions is never lost. Errors are Agones' SDK server's: code
//! UNKNOWN with a message in its words.

use std::sync::Arc;

use berth_proto::agones::sdk::beta::sdk_server::Sdk;
use berth_proto::agones::sdk::beta::{
    AddListValueRequest, Counter, GetCounterRequest, GetListRequest, List, RemoveListValueRequest,
    UpdateCounterRequest, UpdateListRequest,
};
use berth_proto::health::v1::{CounterChange, ListChange, ServerDescription, UpdateServer};
use berth_sdk::SdkError;
use tonic::{Code, Request, Response, Status};

use crate::link::Link;
use crate::sdk::status;
use crate::view::View;

/// The service, over the agent's link to Berth.
pub struct AgonesCounters {
    link: Link,
    view: Arc<View>,
}

/// An error as Agones' SDK server words it.
fn agones_error(message: String) -> Status {
    Status::new(Code::Unknown, message)
}

fn counter_of(description: &ServerDescription, name: &str) -> Result<Counter, Status> {
    description
        .counters
        .iter()
        .find(|counter| counter.name == name)
        .map(|counter| Counter {
            name: counter.name.clone(),
            count: counter.count,
            capacity: counter.capacity,
        })
        .ok_or_else(|| agones_error(format!("counter not found: {name}")))
}

fn list_of(description: &ServerDescription, name: &str) -> Result<List, Status> {
    description
        .lists
        .iter()
        .find(|list| list.name == name)
        .map(|list| List {
            name: list.name.clone(),
            capacity: list.capacity,
            values: list.values.clone(),
        })
        .ok_or_else(|| agones_error(format!("list not found: {name}")))
}

impl AgonesCounters {
    pub fn new(link: Link, view: Arc<View>) -> AgonesCounters {
        AgonesCounters { link, view }
    }

    async fn describe(&self) -> Result<ServerDescription, Status> {
        self.link.server().await?.describe_server().await.map_err(status)
    }

    /// Makes `change` to list `name` and answers the list after it.
    async fn change_list(&self, change: ListChange, full: &str) -> Result<Response<List>, Status> {
        let name = change.name.clone();
        let update = UpdateServer {
            list_changes: vec![change],
            ..Default::default()
        };
        let changed = self.change(update, full, None).await?;
        Ok(Response::new(list_of(&changed, &name)?))
    }

    /// Makes `update` and answers the record after it; Berth's refusals in Agones' words, `what` naming the counter
    /// or list, and `missing` the words for a NOT_FOUND when Agones has its own.
    async fn change(
        &self,
        update: UpdateServer,
        what: &str,
        missing: Option<String>,
    ) -> Result<ServerDescription, Status> {
        let server = self.link.server().await?;
        let changed = server.update_server(update).await.map_err(|error| match error {
            SdkError::Refused { code, message, .. } => match code {
                Code::NotFound => agones_error(missing.unwrap_or_else(|| format!("not found. {message}"))),
                Code::OutOfRange => agones_error(format!("out of range. {what}: {message}")),
                Code::AlreadyExists => agones_error(format!("already exists. {message}")),
                Code::InvalidArgument => agones_error(format!("invalid argument. {message}")),
                code => Status::new(code, message),
            },
            other => status(other),
        })?;
        self.view.touch();
        Ok(changed)
    }
}

#[tonic::async_trait]
impl Sdk for AgonesCounters {
    async fn get_counter(&self, request: Request<GetCounterRequest>) -> Result<Response<Counter>, Status> {
        let name = request.into_inner().name;
        Ok(Response::new(counter_of(&self.describe().await?, &name)?))
    }

    async fn update_counter(&self, request: Request<UpdateCounterRequest>) -> Result<Response<Counter>, Status> {
        let Some(update) = request.into_inner().counter_update_request else {
            return Err(agones_error(
                "invalid argument. CounterUpdateRequest must be set".into(),
            ));
        };
        if update.count.is_none() && update.capacity.is_none() && update.count_diff == 0 {
            return Err(agones_error(format!(
                "invalid argument. Malformed CounterUpdateRequest for {:?}: set count, capacity or countDiff",
                update.name
            )));
        }
        let change = CounterChange {
            name: update.name.clone(),
            capacity: update.capacity,
            count: update.count,
            count_diff: update.count_diff,
        };
        let changed = self
            .change(
                UpdateServer {
                    counter_changes: vec![change],
                    ..Default::default()
                },
                "Count must stay within [0, Capacity]",
                Some(format!("counter not found: {}", update.name)),
            )
            .await?;
        Ok(Response::new(counter_of(&changed, &update.name)?))
    }

    async fn get_list(&self, request: Request<GetListRequest>) -> Result<Response<List>, Status> {
        let name = request.into_inner().name;
        Ok(Response::new(list_of(&self.describe().await?, &name)?))
    }

    async fn update_list(&self, request: Request<UpdateListRequest>) -> Result<Response<List>, Status> {
        let request = request.into_inner();
        let (Some(list), Some(mask)) = (request.list, request.update_mask) else {
            return Err(agones_error(
                "invalid argument. List and UpdateMask must both be set".into(),
            ));
        };
        if mask.paths.is_empty() || mask.paths.iter().any(|path| path != "capacity" && path != "values") {
            return Err(agones_error(format!(
                "invalid argument. Field Mask Path(s): {:?} are invalid for List; use capacity and/or values",
                mask.paths
            )));
        }
        if !(0..=1000).contains(&list.capacity) {
            return Err(agones_error(format!(
                "out of range. Capacity must be within range [0,1000]. Found Capacity: {}",
                list.capacity
            )));
        }
        let set = |path: &str| mask.paths.iter().any(|given| given == path);
        let change = ListChange {
            name: list.name,
            capacity: set("capacity").then_some(list.capacity),
            replace_values: set("values"),
            values: if set("values") { list.values } else { Vec::new() },
            ..Default::default()
        };
        self.change_list(change, "the list is full").await
    }

    async fn add_list_value(&self, request: Request<AddListValueRequest>) -> Result<Response<List>, Status> {
        let request = request.into_inner();
        let change = ListChange {
            name: request.name,
            add_values: vec![request.value],
            ..Default::default()
        };
        self.change_list(change, "No available capacity").await
    }

    async fn remove_list_value(&self, request: Request<RemoveListValueRequest>) -> Result<Response<List>, Status> {
        let request = request.into_inner();
        let change = ListChange {
            name: request.name,
            remove_values: vec![request.value],
            ..Default::default()
        };
        self.change_list(change, "the list").await
    }
}
