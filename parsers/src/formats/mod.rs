//! The readers, one module (or folder) per input format. A reader reads its own format into
//! the model and imports no other reader; what two readers share is a helper module here
//! ([`counter_log`]).

pub mod counter_log;
pub mod dmon;
pub mod kineto;
pub mod nsys;
pub mod smi_query;
pub mod smi_xml;
