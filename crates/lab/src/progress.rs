//! How a study reports its progress. The lab prints nothing: a front end (the `iosched`
//! command, a notebook) implements [`Progress`] and shows it as it likes; [`Quiet`] shows
//! nothing.

/// Told as the runs of a study start and finish. Runs of a matrix execute on several threads,
/// so the calls may come from any of them.
pub trait Progress: Sync {
    /// `total` runs are about to start (called once, before any).
    fn begin(&self, total: usize) {
        let _ = total;
    }
    /// The run `what` starts.
    fn started(&self, what: &str) {
        let _ = what;
    }
    /// The run `what` finished; `outcome` sums it up in a few words (it may be empty).
    fn finished(&self, what: &str, outcome: &str) {
        let _ = (what, outcome);
    }
    /// Every run is done (called once, also after a failure).
    fn end(&self) {}
    /// Something the user should know now (a loop device set up, a file being written).
    fn note(&self, text: &str) {
        let _ = text;
    }
}

/// Shows nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Progress for Quiet {}
