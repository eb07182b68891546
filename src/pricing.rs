//! Prices by model, under the names hosts have used: the table and the cost function are
//! [`crate::models`]; this module only re-exports them.

pub use crate::models::{charged_cost_usd, cost_usd as estimate_cost_usd, price, request_cost_usd};
