//! The ordered index (being written).
