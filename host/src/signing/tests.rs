use super::*;

const SCOPE: Scope<'static> = Scope {
    table: "leases",
    service: "svc",
    subscription: "ship",
};

fn statement<'a>(subscription: &'a str, generation: u64) -> Statement<'a> {
    Statement::Deploy {
        scope: Scope {
            subscription,
            ..SCOPE
        },
        version: "ab",
        generation,
        deploy_id: "d1",
    }
}

#[test]
fn a_signature_verifies_only_for_the_statement_it_was_made_for() {
    let key = SignKey::generate().unwrap();
    let trusted = TrustedKeys::new(vec![key.public()]);
    let signed = key.sign(&statement("ship", 3));
    assert_eq!(trusted.verify(&statement("ship", 3), Some(&signed)), Ok(()));
    let staging = Statement::Deploy {
        scope: Scope {
            table: "leases-staging",
            ..SCOPE
        },
        version: "ab",
        generation: 3,
        deploy_id: "d1",
    };
    let lineage = Statement::Deploy {
        scope: SCOPE,
        version: "ab",
        generation: 3,
        deploy_id: "d2",
    };
    for other in [
        statement("other", 3),
        statement("ship", 2),
        statement("ship", 4),
        staging,
        lineage,
    ] {
        assert_eq!(
            trusted.verify(&other, Some(&signed)),
            Err(Untrusted::BadSignature),
            "{other:?}"
        );
    }
    assert_eq!(
        trusted.verify(&statement("ship", 3), None),
        Err(Untrusted::Unsigned)
    );
    let stranger = SignKey::generate().unwrap();
    let theirs = stranger.sign(&statement("ship", 3));
    assert!(matches!(
        trusted.verify(&statement("ship", 3), Some(&theirs)),
        Err(Untrusted::UnknownKey(_))
    ));
    // Their signature under our key's name does not verify either.
    let forged = Signed {
        key: key.public().to_string(),
        signature: theirs.signature,
    };
    assert_eq!(
        trusted.verify(&statement("ship", 3), Some(&forged)),
        Err(Untrusted::BadSignature)
    );
}

#[test]
fn a_rollout_signature_covers_its_shards_share_and_window_and_is_no_shadow_or_deploy() {
    let key = SignKey::generate().unwrap();
    let trusted = TrustedKeys::new(vec![key.public()]);
    let shards = vec!["shardId-0".to_owned()];
    let every = vec!["shardId-0".to_owned(), "shardId-1".to_owned()];
    let rollout = |shards: &'static [String], window_ms: u64| Statement::Rollout {
        scope: SCOPE,
        canary_id: "c1",
        version: "ab",
        shards,
        share_permille: 500,
        started_at_ms: 10,
        window_ms,
        abort_on: "traps>1%",
    };
    let shards: &'static [String] = shards.leak();
    let every: &'static [String] = every.leak();
    let signed = key.sign(&rollout(shards, 60_000));
    assert_eq!(
        trusted.verify(&rollout(shards, 60_000), Some(&signed)),
        Ok(())
    );
    for other in [
        rollout(every, 60_000),
        rollout(shards, 7 * 24 * 3_600_000),
        Statement::Shadow {
            scope: SCOPE,
            shadow_id: "c1",
            version: "ab",
            http_answer: None,
        },
    ] {
        assert_eq!(
            trusted.verify(&other, Some(&signed)),
            Err(Untrusted::BadSignature),
            "{other:?}"
        );
    }
}

#[test]
fn public_keys_round_trip_and_junk_is_refused() {
    let key = SignKey::generate().unwrap();
    let text = key.public().to_string();
    assert!(text.starts_with("ed25519:"));
    assert_eq!(PublicKey::parse(&text).unwrap(), key.public());
    for junk in ["", "ed25519:", "ed25519:AAAA", "rsa:abc", &text[8..]] {
        assert!(PublicKey::parse(junk).is_err(), "{junk}");
    }
}

#[test]
fn a_written_key_is_private_to_its_owner_reads_back_and_is_never_overwritten() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("shardhost-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("deploy.pem");
    let _ = std::fs::remove_file(&path);
    let key = SignKey::generate().unwrap();
    key.write_new(&path).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(SignKey::read(&path).unwrap().public(), key.public());
    assert!(SignKey::generate().unwrap().write_new(&path).is_err());
    std::fs::write(dir.join("junk.pem"), "not a key").unwrap();
    assert!(matches!(
        SignKey::read(&dir.join("junk.pem")),
        Err(KeyError::Private { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_shadows_signature_covers_what_its_unsent_requests_are_answered() {
    use crate::effects::HttpAnswer;
    let key = SignKey::generate().unwrap();
    let trusted = TrustedKeys::new(vec![key.public()]);
    let shadow = |http_answer| Statement::Shadow {
        scope: SCOPE,
        shadow_id: "s1",
        version: "ab",
        http_answer,
    };
    let told = HttpAnswer::status(201);
    let signed = key.sign(&shadow(Some(&told)));
    assert_eq!(trusted.verify(&shadow(Some(&told)), Some(&signed)), Ok(()));
    let other_status = HttpAnswer::status(200);
    let other_body = HttpAnswer {
        body: b"{}".to_vec(),
        ..told.clone()
    };
    let other_type = HttpAnswer {
        content_type: Some("application/json".into()),
        ..told.clone()
    };
    for other in [
        None,
        Some(&other_status),
        Some(&other_body),
        Some(&other_type),
    ] {
        assert_eq!(
            trusted.verify(&shadow(other), Some(&signed)),
            Err(Untrusted::BadSignature),
            "{other:?}"
        );
    }
    // A shadow told nothing signs what it signed before the answer existed.
    let unstubbed = key.sign(&shadow(None));
    let v1 = serde_json::json!(["shardhost-shadow-v1", ["leases", "svc", "ship"], "s1", "ab"]);
    assert_eq!(shadow(None).bytes(), serde_json::to_vec(&v1).unwrap());
    assert_eq!(trusted.verify(&shadow(None), Some(&unstubbed)), Ok(()));
}
