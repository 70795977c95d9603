//! How fast a block client hands out numbers: T tasks share one `BlockSequence` (blocks of
//! B, otherwise default options) and each draws N numbers; prints numbers/s, block refills
//! and waits (calls that had to wait for the database), and checks that every number came
//! once and that each task's numbers increase.
//!
//! ```text
//! eval "$(scripts/server.sh start)"        # or any MONGODB_URI
//! cargo run --release --example block_speed -- [TASKS] [NUMBERS_PER_TASK] [BLOCK]
//! cargo run --release --example block_speed -- 2 10000000 1000
//! scripts/server.sh stop
//! ```
//!
//! Defaults: 1 task, 10 000 000 numbers, blocks of 1000. Runs on a multi-threaded tokio
//! runtime with as many workers as tasks. Uses (and deletes first) the sequence
//! `block_speed`.

use std::time::Instant;

use dispenser::{Dispenser, Options, Spec, block::BlockOptions};

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .map_or(default, |a| a.parse().expect("a number"))
}

fn main() -> Result<(), dispenser::Error> {
    let tasks = arg(1, 1).max(1);
    let per_task = arg(2, 10_000_000);
    let block = arg(3, 1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(usize::try_from(tasks).expect("tasks"))
        .enable_all()
        .build()
        .expect("a tokio runtime");
    rt.block_on(run(tasks, per_task, block))
}

async fn run(tasks: u64, per_task: u64, block: u64) -> Result<(), dispenser::Error> {
    let uri = std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017".into());
    let d = Dispenser::connect(&uri, Options::default()).await?;
    let _ = d.delete("block_speed").await;
    d.create("block_speed", Spec::default()).await?;
    let blocks = d
        .open_blocks("block_speed")
        .options(BlockOptions::default().with_size(block))
        .await?;
    // Warm up: the first reservation is not part of the measurement.
    let _ = blocks.next().await?;
    let before = blocks.stats();
    let started = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let b = blocks.clone();
        handles.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(usize::try_from(per_task).expect("count"));
            for _ in 0..per_task {
                out.push(b.next().await?);
            }
            Ok::<_, dispenser::Error>(out)
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        let list = h.await.expect("task")?;
        assert!(
            list.windows(2).all(|w| w[0] < w[1]),
            "a task's numbers decreased"
        );
        all.extend(list);
    }
    let elapsed = started.elapsed();
    let after = blocks.stats();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicates");
    let refills = after.block_refills - before.block_refills;
    let waits = after.waits - before.waits;
    println!(
        "tasks {tasks} block {block}: {n} numbers in {:.3} s = {:.2} M numbers/s; \
         {refills} refills, {waits} waits ({:.2} % of refills); block size now {}",
        elapsed.as_secs_f64(),
        n as f64 / elapsed.as_secs_f64() / 1e6,
        100.0 * waits as f64 / refills.max(1) as f64,
        blocks.block_size(),
    );
    blocks.close().await?;
    Ok(())
}
