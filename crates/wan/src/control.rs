//! The control channel: one command a line over TCP on loopback, each
//! answered by lines ending with a line holding `.` alone; the first
//! line of an answer is `ok` or `error`.
//!
//! ```text
//! > cut washington>frankfurt
//! < ok
//! < cut: washington>frankfurt
//! < .
//! ```

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::emulator::Emulator;

/// The longest command line.
const MAX_LINE: usize = 4096;

/// Serves commands for `emulator` on `listener` until the task is
/// dropped.
pub async fn serve(listener: TcpListener, emulator: Arc<Emulator>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let emulator = Arc::clone(&emulator);
        tokio::spawn(async move {
            if let Err(e) = answer(stream, &emulator).await {
                tracing::debug!("a control connection: {e}");
            }
        });
    }
}

async fn answer(stream: TcpStream, emulator: &Emulator) -> io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read.take(1 << 20)).lines();
    while let Some(line) = lines.next_line().await? {
        let answer = if line.len() > MAX_LINE {
            Err(format!("a command is at most {MAX_LINE} bytes"))
        } else if line.trim().is_empty() {
            continue;
        } else {
            emulator.execute(&line).map_err(|e| e.to_string())
        };
        let text = match answer {
            Ok(said) => format!("ok\n{}", said.trim_end()),
            Err(why) => format!("error\n{why}"),
        };
        write.write_all(format!("{text}\n.\n").as_bytes()).await?;
    }
    Ok(())
}

/// Sends one command to the emulator at `addr`: its answer's text, or
/// its refusal as an error.
pub async fn send(addr: SocketAddr, command: &str) -> io::Result<String> {
    let stream = TcpStream::connect(addr).await?;
    let (read, mut write) = stream.into_split();
    write
        .write_all(format!("{}\n", command.trim()).as_bytes())
        .await?;
    let mut lines = BufReader::new(read.take(16 << 20)).lines();
    let status = lines.next_line().await?.unwrap_or_default();
    let mut text = String::new();
    while let Some(line) = lines.next_line().await? {
        if line == "." {
            break;
        }
        text.push_str(&line);
        text.push('\n');
    }
    match status.as_str() {
        "ok" => Ok(text),
        "error" => Err(io::Error::other(text.trim_end().to_string())),
        _ => Err(io::Error::other(format!(
            "{addr} does not answer as a WAN emulator's control channel"
        ))),
    }
}
