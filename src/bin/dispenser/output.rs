//! Writing answers to standard output: the error a failed write becomes, and names shown one
//! per line.

use std::io;

use dispenser::Error;

/// A failed write to standard output, as the error the command fails with.
pub fn io_err(e: io::Error) -> Error {
    Error::InvalidArgument {
        what: "standard output".into(),
        reason: e.to_string(),
    }
}

/// A stored name as shown in line-oriented output: control characters (which no valid name
/// has, but another client may have written one) are escaped, so each sequence stays on its
/// own line.
pub fn one_line_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_debug().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}
