//! The smallest useful program: ensure a sequence, draw numbers.
//!
//! ```text
//! MONGODB_URI=mongodb://127.0.0.1:27017 cargo run --example quickstart
//! ```

use dispenser::{Dispenser, Options, Spec};

#[tokio::main]
async fn main() -> Result<(), dispenser::Error> {
    let uri = std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017".into());
    let dispenser = Dispenser::connect(&uri, Options::default()).await?;

    // Created on first use; later runs (and other processes) continue the same sequence.
    let orders = dispenser.ensure("orders", Spec::default()).await?;
    for _ in 0..3 {
        println!("order {}", orders.next().await?);
    }

    // A contiguous run of numbers in one write.
    let batch = orders.next_n(5).await?;
    println!("batch {}..={}", batch.first(), batch.last());
    Ok(())
}
