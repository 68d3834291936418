//! Reading a desired row back: every attribute checked before anything is allocated or
//! fetched ([`parse`]); a row that fails is a [`BadRow`] naming the attribute.

use aws_sdk_dynamodb::types::AttributeValue;

use super::*;

/// Reads and checks one desired row; `max_size` is the largest component this host accepts.
pub fn parse(item: &Item, max_size: u64) -> Result<Desired, BadRow> {
    let version = item.get(VERSION).and_then(|v| v.as_s().ok()).cloned();
    let generation = item
        .get(GENERATION)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let known = |attribute, problem: String| BadRow {
        attribute,
        problem,
        version: version.clone().filter(|v| is_version(v)),
        generation,
    };
    let r = Reader { item, bad: &known };
    let generation = r.number(GENERATION, 1, MAX_GENERATION)?;
    let component = r.component(VERSION, SIZE, CHUNKS, UPLOAD, max_size)?;
    let previous = match item.get(PREVIOUS_VERSION) {
        None => None,
        Some(_) => Some(r.component(
            PREVIOUS_VERSION,
            PREVIOUS_SIZE,
            PREVIOUS_CHUNKS,
            PREVIOUS_UPLOAD,
            max_size,
        )?),
    };
    let deploy_id = match r.text(DEPLOY_ID)? {
        Some(id) if !is_id(&id) => {
            return Err(known(
                DEPLOY_ID,
                "is not 1–64 letters, digits or `-`".into(),
            ));
        }
        id => id.unwrap_or_default(),
    };
    let signed = match (r.text(SIGNATURE)?, r.text(SIGNED_BY)?) {
        (Some(signature), Some(key)) => Some(Signed { key, signature }),
        (None, None) => None,
        _ => {
            return Err(known(
                SIGNATURE,
                "comes without `signed_by` (or the other way round)".into(),
            ));
        }
    };
    let previous_signed = r.previous_signed()?;
    let deployed_by = r.text(DEPLOYED_BY)?.unwrap_or_default();
    Ok(Desired {
        component,
        generation,
        deploy_id,
        deployed_by: deployed_by.chars().take(MAX_DEPLOYED_BY).collect(),
        deployed_at_ms: r.optional_number(DEPLOYED_AT)?.unwrap_or(0),
        previous,
        previous_signed,
        signed,
    })
}

/// Checked attribute reads for [`parse`].
struct Reader<'a, F: Fn(&'static str, String) -> BadRow> {
    item: &'a Item,
    bad: &'a F,
}

impl<F: Fn(&'static str, String) -> BadRow> Reader<'_, F> {
    fn text(&self, attr: &'static str) -> Result<Option<String>, BadRow> {
        match self.item.get(attr) {
            None => Ok(None),
            Some(AttributeValue::S(v)) => Ok(Some(v.clone())),
            Some(other) => Err((self.bad)(
                attr,
                format!("is not a string (S): {}", kind(other)),
            )),
        }
    }

    /// The previous version's signature: its four attributes together, or none of them.
    fn previous_signed(&self) -> Result<Option<Intent>, BadRow> {
        let generation = self.optional_number(PREVIOUS_GENERATION)?;
        let deploy_id = self.text(PREVIOUS_DEPLOY_ID)?;
        let signature = self.text(PREVIOUS_SIGNATURE)?;
        let key = self.text(PREVIOUS_SIGNED_BY)?;
        match (generation, deploy_id, signature, key) {
            (None, None, None, None) => Ok(None),
            (Some(generation), Some(deploy_id), Some(signature), Some(key))
                if is_id(&deploy_id) =>
            {
                Ok(Some(Intent {
                    generation,
                    deploy_id,
                    signed: Signed { key, signature },
                }))
            }
            _ => Err((self.bad)(
                PREVIOUS_SIGNATURE,
                "comes without all of `previous_generation`, `previous_deploy_id` (an id) and \
                 `previous_signed_by`"
                    .into(),
            )),
        }
    }

    fn optional_number(&self, attr: &'static str) -> Result<Option<u64>, BadRow> {
        match self.item.get(attr) {
            None => Ok(None),
            Some(AttributeValue::N(v)) => v.parse::<u64>().map(Some).map_err(|_| {
                (self.bad)(
                    attr,
                    format!("is not a whole number from 0 to 2^64-1: {}", cut(v)),
                )
            }),
            Some(other) => Err((self.bad)(
                attr,
                format!("is not a number (N): {}", kind(other)),
            )),
        }
    }

    fn number(&self, attr: &'static str, min: u64, max: u64) -> Result<u64, BadRow> {
        let v = self
            .optional_number(attr)?
            .ok_or_else(|| (self.bad)(attr, "is missing".into()))?;
        if !(min..=max).contains(&v) {
            return Err((self.bad)(
                attr,
                format!("{v} is not between {min} and {max}"),
            ));
        }
        Ok(v)
    }

    fn component(
        &self,
        version: &'static str,
        size: &'static str,
        chunks: &'static str,
        upload_attr: &'static str,
        max_size: u64,
    ) -> Result<StoredComponent, BadRow> {
        let v = self
            .text(version)?
            .ok_or_else(|| (self.bad)(version, "is missing".into()))?;
        if !is_version(&v) {
            return Err((self.bad)(
                version,
                format!("is not a sha256 in hex: {}", cut(&v)),
            ));
        }
        let bytes = self.optional_number(size)?;
        let bytes = bytes.ok_or_else(|| (self.bad)(size, "is missing".into()))?;
        if bytes == 0 || bytes > max_size {
            return Err((self.bad)(
                size,
                format!(
                    "{bytes} bytes is not between 1 and [fleet] max_component_size ({max_size})"
                ),
            ));
        }
        let parts = bytes.div_ceil(CHUNK_BYTES as u64);
        let stored = self.optional_number(chunks)?;
        if stored != Some(parts) {
            return Err((self.bad)(
                chunks,
                format!("is {stored:?}, but {bytes} bytes are cut into {parts} parts"),
            ));
        }
        let upload = self.text(upload_attr)?;
        if let Some(u) = &upload
            && !is_id(u)
        {
            return Err((self.bad)(
                upload_attr,
                format!("is not an upload id: {}", cut(u)),
            ));
        }
        Ok(StoredComponent {
            version: v,
            size: bytes,
            chunks: u32::try_from(parts).expect("at most max_component_size / CHUNK_BYTES parts"),
            upload,
        })
    }
}

/// An attribute value's type, for a message.
fn kind(v: &AttributeValue) -> &'static str {
    match v {
        AttributeValue::S(_) => "a string",
        AttributeValue::N(_) => "a number",
        AttributeValue::B(_) => "binary",
        AttributeValue::Bool(_) => "a boolean",
        AttributeValue::Null(_) => "null",
        AttributeValue::L(_) => "a list",
        AttributeValue::M(_) => "a map",
        _ => "a set",
    }
}

/// Text from the table, cut for a message.
fn cut(text: &str) -> String {
    let mut out: String = text.chars().take(40).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}
