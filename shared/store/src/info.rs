//! What Redis says of itself (INFO), read from every node: a cluster's client asks every master and answers by
//! node. The services read from it whether Redis still takes writes; the load tests, what work it has done.

use redis::Value;

use crate::{Store, StoreError};

impl Store {
    /// The `name:value` lines of INFO `section`, every node's one after another.
    pub async fn info(&self, section: &str) -> Result<Vec<String>, StoreError> {
        let reply: Value = self.query(redis::cmd("INFO").arg(section)).await?;
        let mut texts = Vec::new();
        collect_texts(&reply, &mut texts);
        Ok(texts
            .iter()
            .flat_map(|text| text.lines())
            .map(|line| line.trim().to_owned())
            .collect())
    }

    /// Whether a node is at its `maxmemory`: with the `noeviction` policy Berth needs, it then refuses every write
    /// (RESOURCE_EXHAUSTED) and serves reads, until memory is freed.
    pub async fn memory_full(&self) -> Result<bool, StoreError> {
        let mut used = 0_u64;
        for line in self.info("memory").await? {
            let number = |prefix: &str| line.strip_prefix(prefix).and_then(|value| value.parse::<u64>().ok());
            if let Some(bytes) = number("used_memory:") {
                used = bytes;
            } else if let Some(limit) = number("maxmemory:")
                && limit > 0
                && used >= limit
            {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

fn collect_texts(value: &Value, texts: &mut Vec<String>) {
    match value {
        Value::BulkString(bytes) => texts.push(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => texts.push(text.clone()),
        Value::VerbatimString { text, .. } => texts.push(text.clone()),
        Value::Array(values) | Value::Set(values) => values.iter().for_each(|value| collect_texts(value, texts)),
        // Node address → its answer: an address is no `name:value` line.
        Value::Map(pairs) => {
            for (key, value) in pairs {
                collect_texts(key, texts);
                collect_texts(value, texts);
            }
        }
        _ => {}
    }
}
