//! One store operation sent until the store answers: a transient error (the store or a server
//! out of reach) is tried again with back-off, every send named by one operation id, made when
//! a transport first asks for it ([`resend_scope`]), so that a server answers a send of a write
//! it already did with its first answer instead of doing it twice or refusing it as a
//! conflict. A store in this process never asks: its writes make no id.

use std::future::Future;
use std::time::Duration;

use aiki_store::StoreError;
use aiki_store::operation::{WriteName, resend_scope};

/// The first pause between two sends; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// The longest pause between two sends.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Sends `op` until it is answered: an answer (success or a refusal) is returned; after a
/// transient error `again` is asked, with the error and the number of the send that failed,
/// whether to send once more (after a pause, in real time: a store's recovery is not run
/// timing), else that error is returned.
pub(crate) async fn resent<F, Fut, T>(
    op: F,
    mut again: impl FnMut(&StoreError, u64) -> bool,
) -> Result<T, StoreError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let name = WriteName::new();
    let mut pause = FIRST_PAUSE;
    let mut attempt: u64 = 1;
    loop {
        match resend_scope(name.clone(), attempt > 1, op()).await {
            Err(error) if error.is_transient() && again(&error, attempt) => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                attempt += 1;
            }
            answered => return answered,
        }
    }
}
