//! The last lines of a child's standard error, kept by a thread of its own
//! for messages ("; its stderr ended with: …").

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The last lines of a stream.
#[derive(Default, Clone)]
pub(crate) struct Tail(Arc<Mutex<VecDeque<String>>>);

impl Tail {
    /// Keep the last `keep` lines of `stream`, in a thread of its own.
    pub(crate) fn follow(&self, stream: impl Read + Send + 'static, keep: usize) {
        let tail = Arc::clone(&self.0);
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                if t.len() == keep {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
    }

    /// The tail for a message ("; its stderr ended with: …"), or nothing.
    pub(crate) fn message(&self) -> String {
        // Give the reading thread a moment to read the last words.
        std::thread::sleep(Duration::from_millis(50));
        let t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if t.is_empty() {
            String::new()
        } else {
            format!(
                "; its stderr ended with: {}",
                t.iter().cloned().collect::<Vec<_>>().join(" | ")
            )
        }
    }
}
