//! The console's HTTP side: one accept loop for plain and TLS
//! connections with a bound on how many are served at once, the routes,
//! the embedded pages, and the headers every answer carries.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::{Console, auth, directory, entries, jobs, runs, scenarios};

/// The largest request body taken (a scenario upload is bounded lower).
const MAX_BODY_BYTES: usize = 256 << 10;
/// A TLS handshake, or a request's head, must arrive within this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A failed request: its status and what to tell the person (JSON).
#[derive(Debug)]
pub(crate) struct ApiError(pub(crate) StatusCode, pub(crate) String);

impl ApiError {
    pub(crate) fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }

    pub(crate) fn not_found(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::NOT_FOUND, message.into())
    }

    /// The directory could not be reached or refused the operation.
    pub(crate) fn directory(error: &anyhow::Error) -> ApiError {
        ApiError(StatusCode::BAD_GATEWAY, format!("{error:#}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.1 });
        (self.0, axum::Json(body)).into_response()
    }
}

/// What a handler answers.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

/// The pages and scripts, embedded: no build step, nothing fetched.
mod assets {
    pub(super) const LOGIN: &str = include_str!("assets/login.html");
    pub(super) const LOGIN_JS: &str = include_str!("assets/login.js");
    pub(super) const INDEX: &str = include_str!("assets/index.html");
    pub(super) const APP_JS: &str = include_str!("assets/app.js");
    pub(super) const CHART_JS: &str = include_str!("assets/chart.js");
    pub(super) const APP_CSS: &str = include_str!("assets/app.css");
}

/// Every route. Only the sign-in page, its script and the sign-in
/// request answer without a session; everything else is behind [`auth::require_session`].
pub(crate) fn router(console: Arc<Console>) -> Router {
    let api = Router::new()
        .merge(scenarios::routes())
        .merge(jobs::routes())
        .merge(runs::routes())
        .merge(directory::routes())
        .merge(entries::routes())
        .route("/api/session", get(auth::whoami).delete(auth::sign_out));
    let signed_in = Router::new()
        .route("/", get(|| async { page(assets::INDEX, HTML) }))
        .route(
            "/assets/app.js",
            get(|| async { page(assets::APP_JS, JAVASCRIPT) }),
        )
        .route(
            "/assets/chart.js",
            get(|| async { page(assets::CHART_JS, JAVASCRIPT) }),
        )
        .route(
            "/assets/app.css",
            get(|| async { page(assets::APP_CSS, CSS) }),
        )
        .merge(api)
        .layer(middleware::from_fn_with_state(
            Arc::clone(&console),
            auth::require_session,
        ));
    Router::new()
        .route("/login", get(|| async { page(assets::LOGIN, HTML) }))
        // The sign-in form's script: no data, only the form's code.
        .route(
            "/assets/login.js",
            get(|| async { page(assets::LOGIN_JS, JAVASCRIPT) }),
        )
        .route("/api/session", axum::routing::post(auth::sign_in))
        .merge(signed_in)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn(security_headers))
        .with_state(console)
}

pub(crate) const HTML: &str = "text/html; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// `body` answered as content of type `kind`.
pub(crate) fn page(body: impl IntoResponse, kind: &'static str) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(kind))],
        body,
    )
        .into_response()
}

/// Headers on every answer: scripts only from the console itself, no
/// framing by other sites, no guessing of content types, nothing cached
/// (pages hold a signed-in user's data).
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'self'; form-action 'self'",
        ),
    );
    headers.insert(
        header::X_FRAME_OPTIONS,
        HeaderValue::from_static("SAMEORIGIN"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// The TLS side of the listener, from PEM files.
pub(crate) fn tls_acceptor(certificate: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let chain = meridian_server::read_certificates(certificate)?;
    let key = meridian_server::read_private_key(key)?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .context("TLS protocol versions")?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .context("the console's certificate and key do not go together")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts connections until the process ends, serving each on its own
/// task; at most `max_connections` at once (the next waits in the
/// kernel's backlog).
pub(crate) async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    max_connections: usize,
) -> anyhow::Result<()> {
    let permits = Arc::new(tokio::sync::Semaphore::new(max_connections.max(1)));
    loop {
        let permit = Arc::clone(&permits)
            .acquire_owned()
            .await
            .context("the connection limit closed")?;
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("console: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(router.clone());
        let tls = tls.clone();
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HANDSHAKE_TIMEOUT);
            let _ = match tls {
                Some(acceptor) => {
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
                None => {
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
            };
            drop(permit);
        });
    }
}
