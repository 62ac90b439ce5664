//! Tessera: a multi-core main-memory OLTP engine.
#![warn(missing_docs)]

pub mod epoch;
pub mod index;
