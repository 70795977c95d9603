//! The dispensing service mounted in an app's own axum router, under `/numbers`: the app
//! keeps its own routes, and the API, the pages, `/metrics` and `/openapi.json` answer under
//! the prefix.
//!
//! ```sh
//! export "$(scripts/server.sh start)"          # a MongoDB-compatible server, if none runs
//! DISPENSER_TOKENS='{"tokens": [{"name": "app", "token": "app-token-0123456789",
//!   "sequences": ["*"], "operations": ["next", "create", "peek", "list"]}]}' \
//!   cargo run -p dispenser-server --example mount
//! curl -X POST -H 'Authorization: Bearer app-token-0123456789' \
//!   http://127.0.0.1:3000/numbers/v1/sequences/orders/next
//! ```
//!
//! `tests/integration/mount.rs` runs [`app`] against the test server.

use std::net::SocketAddr;

use axum::Router;
use axum::routing::get;
use dispenser::{Dispenser, Options};
use dispenser_server::{Config, Server};

/// The app: its own page at `/`, and the service under `/numbers`.
pub fn app(server: &Server) -> Router {
    Router::new()
        .route("/", get(|| async { "the app's own page" }))
        .nest("/numbers", server.router())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let uri = std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017".into());
    let tokens = std::env::var("DISPENSER_TOKENS")
        .map_err(|_| "set DISPENSER_TOKENS to the tokens' JSON (see the example's docs)")?;
    let dispenser = Dispenser::connect(&uri, Options::default()).await?;
    let server = Server::new(
        dispenser,
        Config::default()
            .with_tokens_json(tokens)
            .with_database_uri(&uri),
    )?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("the app listens on http://{}/", listener.local_addr()?);
    // `ConnectInfo` gives the service each client's address (the ticket links' limits).
    axum::serve(
        listener,
        app(&server).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    // Gives back the numbers the block clients hold.
    let returned = server.shutdown().await;
    println!(
        "stopped; {} unused number(s) given back",
        returned.given_back
    );
    Ok(())
}
