//! A renamed field never reads as `None`: run version A of a workflow until it suspends,
//! deploy A' under the same name and version with a recorded type changed, wake the run, and
//! check that a rename fails the run (task and child outputs, event payloads, the run's input)
//! while the legitimate changes (an optional field added, a field removed, also beside a
//! skipped `None`, a rollback meeting an extra field) keep replaying.

use aiki::{Event, Run, RunRecord, RunStatus, Task, TaskError, Workflow, WorkflowError};
use aiki_tests::{Backend, Harness, on_every_backend};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct Contact {
    email: String,
}

/// `Contact` with its field renamed and made optional: replaying `{email}` into it would read
/// `None`.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContactRenamed {
    email_address: Option<String>,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContactWithPhone {
    email: String,
    phone: Option<String>,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct Profile {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    nick: Option<String>,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProfileWithoutName {
    #[serde(skip_serializing_if = "Option::is_none")]
    nick: Option<String>,
}

#[aiki::task(name = "fetch-contact")]
async fn fetch_contact(id: String) -> Result<Contact, TaskError> {
    Ok(Contact {
        email: format!("{id}@example.com"),
    })
}

#[aiki::task(name = "fetch-contact")]
async fn fetch_contact_renamed(id: String) -> Result<ContactRenamed, TaskError> {
    Ok(ContactRenamed {
        email_address: Some(format!("{id}@example.com")),
    })
}

#[aiki::task(name = "fetch-contact")]
async fn fetch_contact_with_phone(id: String) -> Result<ContactWithPhone, TaskError> {
    Ok(ContactWithPhone {
        email: format!("{id}@example.com"),
        phone: Some("555".to_owned()),
    })
}

#[aiki::task(name = "fetch-profile")]
async fn fetch_profile(id: String) -> Result<Profile, TaskError> {
    Ok(Profile {
        name: id,
        nick: None,
    })
}

#[aiki::task(name = "fetch-profile")]
async fn fetch_profile_without_name(_id: String) -> Result<ProfileWithoutName, TaskError> {
    Ok(ProfileWithoutName { nick: None })
}

#[aiki::workflow(name = "contact-output", version = "1", events(proceed))]
async fn contact_output(run: &Run, id: String) -> Result<String, WorkflowError> {
    let contact = FetchContact.start(run, id).await?;
    run.events().proceed().wait().await?;
    Ok(contact.email)
}

#[aiki::workflow(name = "contact-output", version = "1", events(proceed))]
async fn contact_output_renamed(run: &Run, id: String) -> Result<String, WorkflowError> {
    let contact = FetchContactRenamed.start(run, id).await?;
    run.events().proceed().wait().await?;
    Ok(contact.email_address.unwrap_or_else(|| "none".to_owned()))
}

#[aiki::workflow(name = "contact-output", version = "1", events(proceed))]
async fn contact_output_with_phone(run: &Run, id: String) -> Result<String, WorkflowError> {
    let contact = FetchContactWithPhone.start(run, id).await?;
    run.events().proceed().wait().await?;
    Ok(format!("{} {:?}", contact.email, contact.phone))
}

#[aiki::workflow(name = "profile-output", version = "1", events(proceed))]
async fn profile_output(run: &Run, id: String) -> Result<String, WorkflowError> {
    let profile = FetchProfile.start(run, id).await?;
    run.events().proceed().wait().await?;
    Ok(profile.name)
}

#[aiki::workflow(name = "profile-output", version = "1", events(proceed))]
async fn profile_output_without_name(run: &Run, id: String) -> Result<String, WorkflowError> {
    let profile = FetchProfileWithoutName.start(run, id).await?;
    run.events().proceed().wait().await?;
    Ok(format!("{:?}", profile.nick))
}

/// Starts a run of `before` and lets it suspend, deploys `after` under the same name and
/// version, sends the `P` event (declared by both), and returns the run once it is `end`.
async fn change<A, B, P>(
    backend: Backend,
    before: A,
    after: B,
    input: A::Input,
    end: RunStatus,
) -> RunRecord
where
    A: Workflow,
    B: Workflow,
    P: Event<Payload = ()>,
{
    let mut h = Harness::new(backend).await;
    h.deploy(move |w| w.register(before)).await;
    let run = h.client.start::<A>(input).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(move |w| w.register(after)).await;
    run.send::<P>(()).await.unwrap();
    h.reach(&run, end).await
}

/// The failure recorded on a failed run, asserting its kind.
fn failure(run: &RunRecord, kind: &str) -> String {
    assert_eq!(run.status, RunStatus::Failed);
    let error = run.error.clone().expect("a failed run records its error");
    assert_eq!(error.kind, kind, "{}", error.message);
    error.message
}

/// The message names the recorded field, the optional one it would leave `None`, and why.
fn assert_names_the_rename(message: &str) {
    assert!(
        message.contains(
            "recorded field `email` is not in the current type, which declares optional \
             `email_address` that the record lacks: a renamed field would read as None"
        ),
        "{message}"
    );
}

async fn a_renamed_task_output_field_fails_the_run(backend: Backend) {
    let record = change::<_, _, ContactOutputProceed>(
        backend,
        ContactOutput,
        ContactOutputRenamed,
        "u1".into(),
        RunStatus::Failed,
    )
    .await;
    let message = failure(&record, "output_schema_mismatch");
    assert_names_the_rename(&message);
    assert!(message.contains("task `fetch-contact`"), "{message}");
    let address = FetchContact
        .address(&"u1".to_owned())
        .unwrap()
        .into_string();
    assert!(message.contains(&address), "{message}");
}

async fn an_added_optional_output_field_replays(backend: Backend) {
    let record = change::<_, _, ContactOutputProceed>(
        backend,
        ContactOutput,
        ContactOutputWithPhone,
        "u1".into(),
        RunStatus::Completed,
    )
    .await;
    assert_eq!(
        record.output,
        Some(serde_json::json!("u1@example.com None"))
    );
}

async fn a_rollback_meeting_an_extra_recorded_field_replays(backend: Backend) {
    let record = change::<_, _, ContactOutputProceed>(
        backend,
        ContactOutputWithPhone,
        ContactOutput,
        "u1".into(),
        RunStatus::Completed,
    )
    .await;
    assert_eq!(record.output, Some(serde_json::json!("u1@example.com")));
}

async fn a_removed_field_beside_a_skipped_none_replays(backend: Backend) {
    let record = change::<_, _, ProfileOutputProceed>(
        backend,
        ProfileOutput,
        ProfileOutputWithoutName,
        "u1".into(),
        RunStatus::Completed,
    )
    .await;
    assert_eq!(record.output, Some(serde_json::json!("None")));
}

// The run's own input, checked at every execution.
#[aiki::workflow(name = "contact-input", version = "1", events(proceed))]
async fn contact_input(run: &Run, contact: Contact) -> Result<String, WorkflowError> {
    run.events().proceed().wait().await?;
    Ok(contact.email)
}

#[aiki::workflow(name = "contact-input", version = "1", events(proceed))]
async fn contact_input_renamed(
    run: &Run,
    contact: ContactRenamed,
) -> Result<String, WorkflowError> {
    run.events().proceed().wait().await?;
    Ok(contact.email_address.unwrap_or_else(|| "none".to_owned()))
}

async fn a_renamed_run_input_field_fails_the_run(backend: Backend) {
    let contact = Contact {
        email: "u1@example.com".into(),
    };
    let record = change::<_, _, ContactInputProceed>(
        backend,
        ContactInput,
        ContactInputRenamed,
        contact,
        RunStatus::Failed,
    )
    .await;
    let message = failure(&record, "input_schema_mismatch");
    assert_names_the_rename(&message);
    assert!(message.contains("contact-input@1"), "{message}");
}

// An event payload received before the change.
#[aiki::workflow(name = "contact-event", version = "1", events(contact = Contact, proceed))]
async fn contact_event(run: &Run, _id: String) -> Result<String, WorkflowError> {
    let contact = run.events().contact().wait().await?;
    run.events().proceed().wait().await?;
    Ok(contact.email)
}

#[aiki::workflow(name = "contact-event", version = "1", events(contact = ContactRenamed, proceed))]
async fn contact_event_renamed(run: &Run, _id: String) -> Result<String, WorkflowError> {
    let contact = run.events().contact().wait().await?;
    run.events().proceed().wait().await?;
    Ok(contact.email_address.unwrap_or_else(|| "none".to_owned()))
}

async fn a_renamed_event_payload_field_fails_the_run(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(ContactEvent)).await;
    let run = h.client.start::<ContactEvent>("u1".into()).await.unwrap();
    let waiting = h.reach(&run, RunStatus::AwaitingEvent).await;
    let contact = Contact {
        email: "u1@example.com".into(),
    };
    run.send::<ContactEventContact>(contact).await.unwrap();
    h.reach_next(&run, RunStatus::AwaitingEvent, &waiting).await;
    h.deploy(|w| w.register(ContactEventRenamed)).await;
    run.send::<ContactEventProceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    let message = failure(&record, "event_payload_mismatch");
    assert_names_the_rename(&message);
    assert!(message.contains("event `contact`"), "{message}");
}

// A child's recorded output.
#[aiki::workflow(name = "contact-child", version = "1")]
async fn contact_child(_run: &Run, id: String) -> Result<Contact, WorkflowError> {
    Ok(Contact {
        email: format!("{id}@example.com"),
    })
}

#[aiki::workflow(name = "contact-child", version = "1")]
async fn contact_child_renamed(_run: &Run, id: String) -> Result<ContactRenamed, WorkflowError> {
    Ok(ContactRenamed {
        email_address: Some(format!("{id}@example.com")),
    })
}

#[aiki::workflow(name = "contact-parent", version = "1", events(proceed))]
async fn contact_parent(run: &Run, id: String) -> Result<String, WorkflowError> {
    let contact = run.child::<ContactChild>(id).await?.wait().await?;
    run.events().proceed().wait().await?;
    Ok(contact.email)
}

#[aiki::workflow(name = "contact-parent", version = "1", events(proceed))]
async fn contact_parent_renamed(run: &Run, id: String) -> Result<String, WorkflowError> {
    let contact = run.child::<ContactChildRenamed>(id).await?.wait().await?;
    run.events().proceed().wait().await?;
    Ok(contact.email_address.unwrap_or_else(|| "none".to_owned()))
}

async fn a_renamed_child_output_field_fails_the_parent(backend: Backend) {
    let mut h = Harness::new(backend).await;
    h.deploy(|w| w.register(ContactParent).register(ContactChild))
        .await;
    let run = h.client.start::<ContactParent>("u1".into()).await.unwrap();
    h.reach(&run, RunStatus::AwaitingEvent).await;
    h.deploy(|w| {
        w.register(ContactParentRenamed)
            .register(ContactChildRenamed)
    })
    .await;
    run.send::<ContactParentProceed>(()).await.unwrap();
    let record = h.reach(&run, RunStatus::Failed).await;
    let message = failure(&record, "output_schema_mismatch");
    assert_names_the_rename(&message);
    assert!(
        message.contains("child workflow `contact-child@1`"),
        "{message}"
    );
}

on_every_backend!(
    a_renamed_task_output_field_fails_the_run,
    an_added_optional_output_field_replays,
    a_rollback_meeting_an_extra_recorded_field_replays,
    a_removed_field_beside_a_skipped_none_replays,
    a_renamed_run_input_field_fails_the_run,
    a_renamed_event_payload_field_fails_the_run,
    a_renamed_child_output_field_fails_the_parent,
);
