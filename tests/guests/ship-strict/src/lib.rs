//! A release of the shipping example (`examples/shipping`) with a bug on its success path: it
//! counts only the carrier's 200 as a booking and retires a shipment the carrier answered any
//! other 2xx (a 201 Created, say). Its failure path is the example's: a 4xx retires the
//! shipment, a 5xx or an error tries again after 1 s, doubling with the attempt (up to a
//! minute). It keeps no state. `replay --http-answer 201` tells it from the example; a replay
//! answering 503 cannot (both try again).

use shardhost_guest::{Outcome, Record, config, http};

fn ship(record: &Record) -> Outcome {
    let Some(url) = config::get("carrier_url").filter(|url| !url.is_empty()) else {
        return Outcome::Ack;
    };
    match http::post(&url)
        .header("Content-Type", "application/json")
        .body(record.data())
        .send()
    {
        Ok(r) if r.status() == 200 => Outcome::Ack,
        Ok(r) if r.status() < 500 => {
            shardhost_guest::warn!("the carrier did not book it: status={}", r.status());
            Outcome::Drop
        }
        Ok(_) | Err(_) => {
            let delay = 1000u64 << (record.attempt().clamp(1, 7) - 1);
            Outcome::RetryAfter(delay.min(60_000))
        }
    }
}

shardhost_guest::handler!(ship);
