//! One create/ensure path for every kind the service makes (`POST /v1/sequences`,
//! `/v1/queues`, `/v1/gapless`): the kind's create, and with `if_not_exists` its ensure when
//! the name is taken; what a token that may not read the name is told.

use std::future::Future;

use axum::http::StatusCode;
use dispenser::{Error, error::ErrorKind};

use super::errors::ApiError;

/// What is being made: the noun of messages (`sequence`, `queue`, `gap-free sequence`), the
/// name, and the path that shows it (`/v1/queues`: `GET /v1/queues/{name}`).
pub(super) struct Making<'a> {
    pub(super) noun: &'static str,
    pub(super) name: &'a str,
    pub(super) path: &'static str,
    /// The request's `if_not_exists`: a name taken with the settings asked for is no error.
    pub(super) if_not_exists: bool,
    /// Whether the token may read (`peek`) the name: one that may not is told only that the
    /// name is taken — neither its settings nor whether they are the ones asked for.
    pub(super) may_read: bool,
}

/// Makes `m.name` with `create` (the kind's create, which writes nothing when the name is
/// taken and answers an [`ErrorKind::AlreadyExists`] error); when the name is taken and
/// `if_not_exists` (and the token may read it), `ensure` opens what is there — the same
/// settings, else the kind's `spec_conflict`. Answers what was made or found, and the status:
/// 201 when this request made it, 200 when it found it. A name taken otherwise is 409
/// `already_exists`, pointing a token that may read it to what is stored.
pub(super) async fn create_or_ensure<T, C, E>(
    m: Making<'_>,
    create: C,
    ensure: impl FnOnce() -> E,
) -> Result<(T, StatusCode), ApiError>
where
    C: Future<Output = Result<T, Error>>,
    E: Future<Output = Result<T, Error>>,
{
    match create.await {
        Ok(made) => Ok((made, StatusCode::CREATED)),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            if m.if_not_exists && m.may_read {
                return Ok((ensure().await?, StatusCode::OK));
            }
            let see = if m.may_read {
                format!(
                    "GET {}/{{name}} shows it, and `if_not_exists` answers 200 when its settings are the ones asked for",
                    m.path
                )
            } else {
                "a token with `peek` on it sees its state (and gets 200 from `if_not_exists` when its settings are the ones asked for)".to_owned()
            };
            Err(ApiError::new(
                StatusCode::CONFLICT,
                "already_exists",
                format!("{} {:?} already exists; {see}", m.noun, m.name),
            ))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn making(if_not_exists: bool, may_read: bool) -> Making<'static> {
        Making {
            noun: "queue",
            name: "lobby",
            path: "/v1/queues",
            if_not_exists,
            may_read,
        }
    }

    fn taken() -> Error {
        Error::AlreadyExists {
            kind: dispenser::error::Kind::Sequence,
            name: "lobby".to_owned(),
        }
    }

    fn run(
        m: Making<'static>,
        create: Result<u8, Error>,
        ensure: Result<u8, Error>,
    ) -> Result<(u8, StatusCode), ApiError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(create_or_ensure(m, async { create }, || async { ensure }))
    }

    /// Every kind's create goes through here: made is 201; a name taken is ensured only with
    /// `if_not_exists` and a token that may read it (200, or the ensure's error); otherwise
    /// 409 `already_exists`, telling a token that may not read the name nothing more.
    #[test]
    fn a_create_is_made_ensured_or_refused_by_one_rule() {
        let ok = |r: Result<(u8, StatusCode), ApiError>| r.map_err(|e| e.message).unwrap();
        assert_eq!(
            ok(run(making(false, true), Ok(1), Ok(2))),
            (1, StatusCode::CREATED)
        );
        assert_eq!(
            ok(run(making(true, false), Ok(1), Ok(2))),
            (1, StatusCode::CREATED)
        );
        assert_eq!(
            ok(run(making(true, true), Err(taken()), Ok(2))),
            (2, StatusCode::OK)
        );
        let conflict = Error::SpecConflict {
            kind: dispenser::error::Kind::Queue,
            name: "lobby".to_owned(),
            differs: "max 9 (asked 99)".to_owned(),
        };
        let e = run(making(true, true), Err(taken()), Err(conflict)).unwrap_err();
        assert_eq!((e.status, e.code), (StatusCode::CONFLICT, "spec_conflict"));
        for (if_not_exists, may_read, says) in [
            (false, true, "GET /v1/queues/{name} shows it"),
            (true, false, "a token with `peek` on it sees its state"),
            (false, false, "a token with `peek` on it sees its state"),
        ] {
            // The ensure is never run: it would tell whether the settings are the ones asked.
            let e = run(making(if_not_exists, may_read), Err(taken()), Ok(2)).unwrap_err();
            assert_eq!((e.status, e.code), (StatusCode::CONFLICT, "already_exists"));
            assert!(
                e.message.starts_with("queue \"lobby\" already exists; ")
                    && e.message.contains(says),
                "{if_not_exists} {may_read}: {}",
                e.message
            );
        }
        // Another error of the create is its own answer.
        let e = run(
            making(true, true),
            Err(Error::Closed {
                name: "lobby".to_owned(),
            }),
            Ok(2),
        )
        .unwrap_err();
        assert_ne!(e.code, "already_exists");
    }
}
