//! The PostgreSQL store (`postgres://…`): several hosts.

use super::{
    Abandoned, AcquireRequest, AcquireResult, EventRow, Finish, LeaseRow, OutputRow, SlotRow,
    Store, StoreError,
};
use jiff::Timestamp;

pub struct PgStore {
    shown: String,
}

impl PgStore {
    pub fn open(url: &str) -> Result<PgStore, StoreError> {
        Err(StoreError(format!(
            "{}: the PostgreSQL store is not built yet",
            crate::db::mask(url)
        )))
    }
    fn todo<T>(&self) -> Result<T, StoreError> {
        Err(StoreError(format!("{}: not built yet", self.shown)))
    }
}

impl Store for PgStore {
    fn now(&mut self) -> Result<Timestamp, StoreError> {
        self.todo()
    }
    fn acquire(&mut self, _: &AcquireRequest) -> Result<AcquireResult, StoreError> {
        self.todo()
    }
    fn finish(&mut self, _: &Finish) -> Result<(), StoreError> {
        self.todo()
    }
    fn append(&mut self, _: &EventRow) -> Result<(), StoreError> {
        self.todo()
    }
    fn ingest_abandoned(&mut self, _: &Abandoned, _: &[OutputRow]) -> Result<u64, StoreError> {
        self.todo()
    }
    fn abandoned(&mut self) -> Result<Vec<Abandoned>, StoreError> {
        self.todo()
    }
    fn leases(&mut self, _: Option<&str>) -> Result<Vec<LeaseRow>, StoreError> {
        self.todo()
    }
    fn slots(&mut self, _: Option<&str>, _: u32) -> Result<Vec<SlotRow>, StoreError> {
        self.todo()
    }
}
