//! Authentication: every RPC carries `authorization: Bearer <token>`, a JWT (HS256) signed with the
//! deployment's secret. The token names a role, and for a game server the fleet and server it may act for,
//! as GameLift Anywhere hands a process its credentials at launch. The edge checks signature, expiry and role
//! on every call; handlers check scope with [`Caller`].

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use tonic::Status;

/// Shortest signing secret accepted, in bytes.
pub const MIN_KEY_LEN: usize = 32;

/// Who a caller is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Runs the deployment: fleets, queues, scaling, and anything else.
    Operator,
    /// A game back end or matchmaker: placements, claims, sessions, search.
    Client,
    /// One game-server process, for its own registration and sessions only.
    GameServer,
}

/// What a token says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenClaims {
    /// Who the token was issued to, for logs.
    pub sub: String,
    /// The caller's role.
    pub role: Role,
    /// For a game server: the fleet it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<String>,
    /// For a game server: its own id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub game_server: Option<String>,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
}

/// Signs and checks tokens with one secret.
#[derive(Clone)]
pub struct TokenKey {
    secret: Vec<u8>,
}

/// Why a key or token was refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The signing secret is too short to be safe.
    #[error("the token-signing secret must be at least {MIN_KEY_LEN} bytes, got {0}")]
    ShortKey(usize),
    /// The token is not a well-formed HS256 JWT.
    #[error("malformed bearer token: {0}")]
    Malformed(&'static str),
    /// The signature does not match this deployment's secret.
    #[error("bearer token signature does not match")]
    BadSignature,
    /// The token has expired.
    #[error("bearer token expired")]
    Expired,
}

const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;

impl TokenKey {
    /// A key from a secret of at least [`MIN_KEY_LEN`] bytes.
    pub fn new(secret: impl Into<Vec<u8>>) -> Result<TokenKey, AuthError> {
        let secret = secret.into();
        if secret.len() < MIN_KEY_LEN {
            return Err(AuthError::ShortKey(secret.len()));
        }
        Ok(TokenKey { secret })
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes a key of any length")
    }

    /// Signs claims into a token.
    pub fn sign(&self, claims: &TokenClaims) -> String {
        let payload = serde_json::to_vec(claims).expect("claims serialize");
        let signing_input = format!("{}.{}", URL_SAFE_NO_PAD.encode(HEADER), URL_SAFE_NO_PAD.encode(payload));
        let mut mac = self.mac();
        mac.update(signing_input.as_bytes());
        let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{signing_input}.{signature}")
    }

    /// Mints a token for `role` valid for `ttl_seconds`; a game server's is scoped to `(fleet, game server)`.
    pub fn mint(&self, subject: &str, role: Role, scope: Option<(&str, &str)>, ttl_seconds: u64) -> String {
        self.sign(&TokenClaims {
            sub: subject.to_owned(),
            role,
            fleet: scope.map(|(fleet, _)| fleet.to_owned()),
            game_server: scope.map(|(_, server)| server.to_owned()),
            exp: unix_now() + ttl_seconds,
        })
    }

    /// Checks a token's signature and expiry and returns its claims.
    pub fn verify(&self, token: &str) -> Result<TokenClaims, AuthError> {
        let (signing_input, signature) = token.rsplit_once('.').ok_or(AuthError::Malformed("no signature"))?;
        let (header, payload) = signing_input
            .split_once('.')
            .ok_or(AuthError::Malformed("no payload"))?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| AuthError::Malformed("signature is not base64url"))?;
        let mut mac = self.mac();
        mac.update(signing_input.as_bytes());
        mac.verify_slice(&signature).map_err(|_| AuthError::BadSignature)?;
        let header = URL_SAFE_NO_PAD
            .decode(header)
            .map_err(|_| AuthError::Malformed("header is not base64url"))?;
        let header: serde_json::Value =
            serde_json::from_slice(&header).map_err(|_| AuthError::Malformed("header is not JSON"))?;
        if header.get("alg").and_then(|alg| alg.as_str()) != Some("HS256") {
            return Err(AuthError::Malformed("only HS256 tokens are accepted"));
        }
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| AuthError::Malformed("payload is not base64url"))?;
        let claims: TokenClaims =
            serde_json::from_slice(&payload).map_err(|_| AuthError::Malformed("payload is not Berth claims"))?;
        if claims.exp <= unix_now() {
            return Err(AuthError::Expired);
        }
        Ok(claims)
    }
}

/// Seconds since the epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

/// Which roles may call which RPCs. Rules are matched in order by prefix of the gRPC path
/// (`/package.Service/Method`); a path that matches none is refused, so a new RPC is closed until listed.
pub type AccessRules = &'static [(&'static str, &'static [Role])];

/// Paths every caller may use without a token: health checks and reflection.
pub(crate) const PUBLIC_PATHS: [&str; 3] = [
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];

/// How the edge authenticates.
#[derive(Clone)]
pub enum AuthMode {
    /// Tokens are checked with this key.
    Tokens(TokenKey),
    /// Everyone is an operator. Local development only.
    Insecure,
}

/// The authenticated caller of an RPC, put in the request's extensions by the edge.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The token's claims (an operator's when auth is off).
    pub claims: TokenClaims,
}

impl Caller {
    /// The caller of a request. The edge always sets it, so its absence is a server bug.
    pub fn of<T>(request: &tonic::Request<T>) -> Result<&Caller, Status> {
        request
            .extensions()
            .get::<Caller>()
            .ok_or_else(|| Status::internal("request reached a handler without an authenticated caller"))
    }

    /// Refuses a game server acting for another fleet or server; other roles pass.
    pub fn check_game_server(&self, fleet_id: &str, game_server_id: &str) -> Result<(), Status> {
        if self.claims.role != Role::GameServer {
            return Ok(());
        }
        if self.claims.fleet.as_deref() != Some(fleet_id) || self.claims.game_server.as_deref() != Some(game_server_id)
        {
            return Err(Status::permission_denied(format!(
                "this token is for game server {:?} of fleet {:?}, not {game_server_id:?} of {fleet_id:?}",
                self.claims.game_server.as_deref().unwrap_or(""),
                self.claims.fleet.as_deref().unwrap_or(""),
            )));
        }
        Ok(())
    }
}

/// Checks one call's path and `authorization` header; the caller on success.
pub(crate) fn authenticate(
    mode: &AuthMode,
    rules: AccessRules,
    path: &str,
    authorization: Option<&str>,
) -> Result<Caller, Status> {
    let claims = match mode {
        AuthMode::Insecure => TokenClaims {
            sub: "insecure-no-auth".into(),
            role: Role::Operator,
            fleet: None,
            game_server: None,
            exp: u64::MAX,
        },
        AuthMode::Tokens(key) => {
            // The scheme is case-insensitive (RFC 9110), so "bearer" from some clients is accepted too.
            let token = authorization
                .and_then(|value| value.split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, token)| token)
                .ok_or_else(|| Status::unauthenticated("missing 'authorization: Bearer <token>' metadata"))?;
            key.verify(token.trim())
                .map_err(|err| Status::unauthenticated(err.to_string()))?
        }
    };
    let allowed = rules
        .iter()
        .find(|(prefix, _)| path.starts_with(prefix))
        .map(|(_, roles)| *roles)
        .ok_or_else(|| Status::permission_denied(format!("{path} is not open to any role")))?;
    if !allowed.contains(&claims.role) {
        return Err(Status::permission_denied(format!(
            "{path} is open to {allowed:?}, and this token's role is {:?}",
            claims.role
        )));
    }
    Ok(Caller { claims })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> TokenKey {
        TokenKey::new(vec![7u8; 32]).unwrap()
    }

    fn claims(role: Role) -> TokenClaims {
        TokenClaims {
            sub: "test".into(),
            role,
            fleet: Some("fleet-a".into()),
            game_server: Some("gs-1".into()),
            exp: unix_now() + 60,
        }
    }

    const RULES: AccessRules = &[
        (
            "/berth.health.v1.GameServerService/SetInstanceStatus",
            &[Role::Operator],
        ),
        (
            "/berth.health.v1.GameServerService/",
            &[Role::Operator, Role::GameServer],
        ),
    ];

    #[test]
    fn signed_tokens_round_trip_and_tampering_is_caught() {
        let token = key().sign(&claims(Role::Client));
        assert_eq!(key().verify(&token).unwrap(), claims(Role::Client));
        let other = TokenKey::new(vec![8u8; 32]).unwrap();
        assert!(matches!(other.verify(&token), Err(AuthError::BadSignature)));
        let forged = key().sign(&claims(Role::Client)).replacen('.', ".x", 1);
        assert!(key().verify(&forged).is_err());
    }

    #[test]
    fn expired_tokens_and_short_keys_are_refused() {
        let mut old = claims(Role::Operator);
        old.exp = unix_now() - 1;
        assert!(matches!(key().verify(&key().sign(&old)), Err(AuthError::Expired)));
        assert!(matches!(TokenKey::new(vec![1u8; 31]), Err(AuthError::ShortKey(31))));
    }

    #[test]
    fn rules_pick_the_first_matching_prefix() {
        let mode = AuthMode::Tokens(key());
        let gs = format!("Bearer {}", key().sign(&claims(Role::GameServer)));
        let update = "/berth.health.v1.GameServerService/UpdateGameServer";
        assert!(authenticate(&mode, RULES, update, Some(&gs)).is_ok());
        let drain = "/berth.health.v1.GameServerService/SetInstanceStatus";
        let err = authenticate(&mode, RULES, drain, Some(&gs)).unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        let err = authenticate(&mode, RULES, "/berth.x.v1.Unlisted/Call", Some(&gs)).unwrap_err();
        assert_eq!(err.code(), tonic::Code::PermissionDenied);
        let err = authenticate(&mode, RULES, update, None).unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unauthenticated);
    }

    #[test]
    fn game_servers_act_only_for_themselves() {
        let caller = Caller {
            claims: claims(Role::GameServer),
        };
        assert!(caller.check_game_server("fleet-a", "gs-1").is_ok());
        assert_eq!(
            caller.check_game_server("fleet-a", "gs-2").unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        assert_eq!(
            caller.check_game_server("fleet-b", "gs-1").unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        let operator = Caller {
            claims: claims(Role::Operator),
        };
        assert!(operator.check_game_server("fleet-b", "gs-9").is_ok());
    }
}
