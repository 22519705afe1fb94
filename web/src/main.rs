//! Entry point of the viewer (mounts the app).
fn main() {}
