//! Analysis shared by the CLI and the browser.
