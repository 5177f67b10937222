//! The Clutch protocol: the `Message` envelope, the `AgentCard`, ids, validation, error codes, JSON
//! Schemas and message signatures. Pure data and pure functions: no I/O, no async, nothing internal below it.

pub mod card;
pub mod error;
#[cfg(feature = "fuzz")]
pub mod fuzz;
pub mod id;
pub mod message;
pub mod schema;
pub mod sign;
pub mod validate;

pub use card::AgentCard;
pub use error::ErrorCode;
pub use error::{Problem, Problems};
pub use message::{Message, MessageType};

/// The protocol version every envelope and card carries.
pub const VERSION: &str = "clutch/0.1";
