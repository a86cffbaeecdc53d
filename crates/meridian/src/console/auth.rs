//! Signing in: a simple bind to the directory with the DN and password
//! given; on success a session whose token lives in an HttpOnly,
//! SameSite=Strict cookie, and a CSRF token the pages send back in the
//! `X-CSRF-Token` header of every request that changes anything.
//!
//! The password is kept in the session, in this process's memory only,
//! because the entry browser works through LDAP as the signed-in
//! identity (so the directory's access rules apply); it is never sent
//! back, logged, or written to a run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use subtle::ConstantTimeEq as _;

use super::Console;
use super::http::{ApiError, ApiResult};

const COOKIE: &str = "meridian_console";
const CSRF_HEADER: &str = "x-csrf-token";
/// A sign-in's bind must be answered within this.
const BIND_TIMEOUT: Duration = Duration::from_secs(10);

/// Who a request comes from: the handlers' view of a session.
pub(crate) struct SignedIn {
    pub(crate) dn: String,
    pub(crate) password: String,
    pub(crate) csrf: String,
}

/// The DN only: a session's password and token never reach a log.
impl std::fmt::Debug for SignedIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedIn")
            .field("dn", &self.dn)
            .finish_non_exhaustive()
    }
}

struct Session {
    who: Arc<SignedIn>,
    last_used: Instant,
}

/// The sessions signed in, by token.
pub(crate) struct Sessions {
    by_token: Mutex<HashMap<String, Session>>,
    idle: Duration,
    max: usize,
}

impl Sessions {
    pub(crate) fn new(idle: Duration, max: usize) -> Sessions {
        Sessions {
            by_token: Mutex::new(HashMap::new()),
            idle,
            max: max.max(1),
        }
    }

    /// The session of `token`, if it has not been idle too long.
    #[allow(clippy::disallowed_methods)] // session idle time, not directory data
    fn find(&self, token: &str) -> Option<Arc<SignedIn>> {
        let mut sessions = self.by_token.lock().unwrap_or_else(PoisonError::into_inner);
        let session = sessions.get_mut(token)?;
        if session.last_used.elapsed() > self.idle {
            sessions.remove(token);
            return None;
        }
        session.last_used = Instant::now();
        Some(Arc::clone(&session.who))
    }

    /// A new session for `who`; its token. None when the console holds
    /// as many as it may.
    #[allow(clippy::disallowed_methods)] // session idle time, not directory data
    fn open(&self, who: SignedIn) -> Option<String> {
        let mut sessions = self.by_token.lock().unwrap_or_else(PoisonError::into_inner);
        let idle = self.idle;
        sessions.retain(|_, s| s.last_used.elapsed() <= idle);
        if sessions.len() >= self.max {
            return None;
        }
        let token = random_token()?;
        sessions.insert(
            token.clone(),
            Session {
                who: Arc::new(who),
                last_used: Instant::now(),
            },
        );
        Some(token)
    }

    fn close(&self, token: &str) {
        self.by_token
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(token);
    }
}

/// 32 random bytes in hex.
fn random_token() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The session token the request's cookie carries.
fn token_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Lets a request through only with a live session; one that changes
/// anything must also carry the session's CSRF token. Without a session
/// the API answers 401 and a page sends the browser to sign in.
pub(crate) async fn require_session(
    State(console): State<Arc<Console>>,
    mut request: Request,
    next: Next,
) -> Response {
    let who = token_of(request.headers()).and_then(|t| console.sessions.find(t));
    let Some(who) = who else {
        if request.uri().path() == "/" {
            return Redirect::to("/login").into_response();
        }
        return ApiError(StatusCode::UNAUTHORIZED, "sign in first".into()).into_response();
    };
    let safe = matches!(*request.method(), Method::GET | Method::HEAD);
    if !safe {
        let sent = request
            .headers()
            .get(CSRF_HEADER)
            .map(HeaderValue::as_bytes)
            .unwrap_or_default();
        if !bool::from(sent.ct_eq(who.csrf.as_bytes())) {
            return ApiError(
                StatusCode::FORBIDDEN,
                "this request lacks the page's CSRF token (X-CSRF-Token): reload the console"
                    .into(),
            )
            .into_response();
        }
    }
    request.extensions_mut().insert(who);
    next.run(request).await
}

#[derive(Deserialize)]
pub(crate) struct SignInForm {
    dn: String,
    password: String,
}

/// Whether the request's Origin (when the browser sends one) is this
/// console: a sign-in posted from another site is refused.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    origin
        .split_once("://")
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(host))
}

/// `POST /api/session` with `{"dn", "password"}` (JSON only: a form
/// another site posts cannot send it without the browser asking first).
pub(crate) async fn sign_in(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    Json(form): Json<SignInForm>,
) -> ApiResult<Response> {
    if !same_origin(&headers) {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            "a sign-in from another site is refused".into(),
        ));
    }
    if form.dn.trim().is_empty() || form.password.is_empty() {
        return Err(ApiError::bad_request(
            "give a DN and its password (an empty password would be an anonymous bind)",
        ));
    }
    let endpoint = console.endpoint(form.dn.trim(), &form.password);
    if let Err(e) = crate::ldap_client::connect_bound(&endpoint, BIND_TIMEOUT, 1 << 20).await {
        return Err(ApiError(
            StatusCode::UNAUTHORIZED,
            format!("sign-in refused: {e:#}"),
        ));
    }
    let csrf = random_token().ok_or_else(|| {
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "no random numbers".into(),
        )
    })?;
    let who = SignedIn {
        dn: form.dn.trim().to_owned(),
        password: form.password,
        csrf: csrf.clone(),
    };
    let dn = who.dn.clone();
    let token = console.sessions.open(who).ok_or_else(|| {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the console holds as many sessions as it may (--max-sessions); try later".into(),
        )
    })?;
    let secure = if console.https { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict{secure}");
    let mut response = Json(serde_json::json!({ "dn": dn, "csrf": csrf })).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// `GET /api/session`: who is signed in, and the CSRF token to send.
pub(crate) async fn whoami(
    axum::Extension(who): axum::Extension<Arc<SignedIn>>,
) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "dn": who.dn, "csrf": who.csrf }))
}

/// `DELETE /api/session`: signs out.
pub(crate) async fn sign_out(State(console): State<Arc<Console>>, headers: HeaderMap) -> Response {
    if let Some(token) = token_of(&headers) {
        console.sessions.close(token);
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("meridian_console=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_found_among_other_cookies() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; meridian_console=abc; b=2"),
        );
        assert_eq!(token_of(&headers), Some("abc"));
        assert_eq!(token_of(&HeaderMap::new()), None);
    }

    #[test]
    fn sessions_expire_and_are_bounded() {
        let sessions = Sessions::new(Duration::from_secs(60), 1);
        let who = || SignedIn {
            dn: "cn=a".into(),
            password: "p".into(),
            csrf: "c".into(),
        };
        let token = sessions.open(who()).unwrap();
        assert_eq!(sessions.find(&token).unwrap().dn, "cn=a");
        assert!(sessions.open(who()).is_none(), "one session at most");
        sessions.close(&token);
        assert!(sessions.find(&token).is_none());
        let idle = Sessions::new(Duration::ZERO, 4);
        let token = idle.open(who()).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(idle.find(&token).is_none(), "idle past its time");
    }

    #[test]
    fn only_this_console_may_post_a_sign_in() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8389"));
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("http://127.0.0.1:8389"),
        );
        assert!(same_origin(&headers));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(!same_origin(&headers));
    }
}
