//! The real servers the store tests run on (PostgreSQL, MySQL / MariaDB, Redis), one
//! module each, with what they share: the counting proxy and the server helpers.
#![allow(dead_code)]

#[path = "mysqldb.rs"]
pub mod mysqldb;
#[path = "pgdb.rs"]
pub mod pgdb;
#[path = "proxy.rs"]
pub mod proxy;
#[path = "redisdb.rs"]
pub mod redisdb;
#[path = "server.rs"]
pub mod server;
