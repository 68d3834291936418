//! One conditional UpdateItem that writes a whole desired row.

use aws_sdk_dynamodb::types::AttributeValue;

use super::{GENERATION, Seen};
use crate::lease::dynamo_rows::KEY;

/// One UpdateItem of a whole desired row: every attribute set or removed, each through a name
/// placeholder (`size` and others are reserved words in expressions).
#[derive(Default)]
pub(super) struct Write {
    pub(super) names: Vec<(String, String)>,
    pub(super) values: Vec<(String, AttributeValue)>,
    set: Vec<String>,
    remove: Vec<String>,
    pub(super) condition: String,
}

impl Write {
    fn name(&mut self, attr: &str) -> String {
        let placeholder = format!("#a{}", self.names.len());
        self.names.push((placeholder.clone(), attr.to_owned()));
        placeholder
    }

    pub(super) fn set(&mut self, attr: &str, value: AttributeValue) {
        let name = self.name(attr);
        let placeholder = format!(":v{}", self.values.len());
        self.values.push((placeholder.clone(), value));
        self.set.push(format!("{name} = {placeholder}"));
    }

    pub(super) fn maybe(&mut self, attr: &str, value: Option<AttributeValue>) {
        match value {
            Some(v) => self.set(attr, v),
            None => {
                let name = self.name(attr);
                self.remove.push(name);
            }
        }
    }

    pub(super) fn condition(&mut self, seen: &Seen) {
        let key = self.name(KEY);
        let generation = self.name(GENERATION);
        self.condition = match (&seen.exists, &seen.generation) {
            (false, _) => {
                format!("attribute_not_exists({key}) AND attribute_not_exists({generation})")
            }
            (true, None) => {
                format!("attribute_exists({key}) AND attribute_not_exists({generation})")
            }
            (
                true,
                Some(v @ (AttributeValue::S(_) | AttributeValue::N(_) | AttributeValue::B(_))),
            ) => {
                self.values.push((":seen".into(), v.clone()));
                format!("attribute_exists({key}) AND {generation} = :seen")
            }
            // A generation of another type (a list, a map...): only a row is required. Another
            // deploy replacing the same broken row at the same moment may be overwritten.
            (true, Some(_)) => {
                format!("attribute_exists({key}) AND attribute_exists({generation})")
            }
        };
    }

    pub(super) fn expression(&self) -> String {
        let mut e = format!("SET {}", self.set.join(", "));
        if !self.remove.is_empty() {
            e.push_str(&format!(" REMOVE {}", self.remove.join(", ")));
        }
        e
    }
}
