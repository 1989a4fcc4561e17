//! The workflows of the impact check's guide cases: for each case, A (what the runs in flight
//! recorded) and A' (the build about to be deployed), both `name@1`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aiki::{Run, TaskError, WorkflowError};
use serde::{Deserialize, Serialize};

use super::common::{TaskA, TaskB, TaskC};

pub const HOUR: Duration = Duration::from_secs(3600);
pub const MINUTE: Duration = Duration::from_secs(60);

/// Declares a case: A and A', both `name@1`, with the events given.
macro_rules! case {
    ($name:literal, [$($events:tt)*], $a:ident, $a2:ident, |$run:ident, $input:ident| $body:block, |$run2:ident, $input2:ident| $body2:block) => {
        #[aiki::workflow(name = $name, version = "1", events($($events)*))]
        pub async fn $a($run: &Run, $input: String) -> Result<String, WorkflowError> $body

        #[aiki::workflow(name = $name, version = "1", events($($events)*))]
        pub async fn $a2($run2: &Run, $input2: String) -> Result<String, WorkflowError> $body2
    };
}

case!(
    "reorder",
    [proceed],
    reorder,
    reorder2,
    |run, input| {
        TaskA.start(run, input.clone()).await?;
        TaskB.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(String::new())
    },
    |run, input| {
        TaskB.start(run, input.clone()).await?;
        TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(String::new())
    }
);

case!(
    "remove",
    [proceed],
    remove,
    remove2,
    |run, input| {
        TaskA.start(run, input.clone()).await?;
        TaskB.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(String::new())
    },
    |run, input| {
        TaskB.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(String::new())
    }
);

case!(
    "remove-then-new",
    [proceed],
    remove_then_new,
    remove_then_new2,
    |run, input| {
        TaskA.start(run, input.clone()).await?;
        run.events().proceed().wait().await?;
        TaskB.start(run, input).await
    },
    |run, input| {
        run.events().proceed().wait().await?;
        TaskB.start(run, input).await
    }
);

case!(
    "append",
    [proceed],
    append,
    append2,
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    },
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        TaskB.start(run, a).await
    }
);

case!(
    "insert",
    [proceed],
    insert,
    insert2,
    |run, input| {
        TaskA.start(run, input.clone()).await?;
        TaskB.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(String::new())
    },
    |run, input| {
        TaskA.start(run, input.clone()).await?;
        TaskC.start(run, input.clone()).await?;
        TaskB.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(String::new())
    }
);

case!(
    "change-input",
    [proceed],
    change_input,
    change_input2,
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    },
    |run, input| {
        let a = TaskA.start(run, format!("{input}!")).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    }
);

// A rename changes the address just as another task would: task-a's entry, task-c's call.
case!(
    "rename",
    [proceed],
    rename,
    rename2,
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    },
    |run, input| {
        let a = TaskC.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    }
);

// Conditional logic: only `premium` runs recorded task-c (the discount).
case!(
    "discount",
    [proceed],
    discount,
    discount2,
    |run, input| {
        if input == "premium" {
            TaskC.start(run, input.clone()).await?;
        }
        TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(String::new())
    },
    |run, input| {
        TaskC.start(run, input.clone()).await?;
        TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(String::new())
    }
);

case!(
    "waits",
    [approved = String, payment_received = u64],
    waits,
    waits2,
    |run, _input| {
        let approver = run.events().approved().wait().await?;
        let cents = run.events().payment_received().wait().await?;
        Ok(format!("{approver}:{cents}"))
    },
    |run, _input| {
        let cents = run.events().payment_received().wait().await?;
        let approver = run.events().approved().wait().await?;
        Ok(format!("{approver}:{cents}"))
    }
);

case!(
    "add-wait",
    [proceed, approved = String],
    add_wait,
    add_wait2,
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    },
    |run, input| {
        let _approver = run.events().approved().wait().await?;
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    }
);

case!(
    "event-into-input",
    [proceed, approved = String],
    event_into_input,
    event_into_input2,
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    },
    |run, input| {
        let approver = run.events().approved().wait().await?;
        let a = TaskA.start(run, format!("{input}/{approver}")).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    }
);

case!(
    "sleep-longer",
    [proceed],
    sleep_longer,
    sleep_longer2,
    |run, input| {
        TaskA.start(run, input.clone()).await?;
        run.sleep("wait-for-fulfillment", HOUR).await?;
        TaskB.start(run, input).await
    },
    |run, input| {
        TaskA.start(run, input.clone()).await?;
        run.sleep("wait-for-fulfillment", HOUR + 30 * MINUTE)
            .await?;
        TaskB.start(run, input).await
    }
);

case!(
    "sleep-shorter",
    [proceed],
    sleep_shorter,
    sleep_shorter2,
    |run, input| {
        TaskA.start(run, input.clone()).await?;
        run.sleep("wait-for-fulfillment", HOUR).await?;
        TaskB.start(run, input).await
    },
    |run, input| {
        TaskA.start(run, input.clone()).await?;
        run.sleep("wait-for-fulfillment", 30 * MINUTE).await?;
        TaskB.start(run, input).await
    }
);

case!(
    "same-named-sleeps",
    [proceed],
    delays,
    delays2,
    |run, input| {
        run.sleep("delay", 5 * MINUTE).await?;
        run.sleep("delay", HOUR).await?;
        TaskA.start(run, input).await
    },
    |run, input| {
        run.sleep("delay", HOUR).await?;
        run.sleep("delay", 5 * MINUTE).await?;
        TaskA.start(run, input).await
    }
);

case!(
    "named-sleeps",
    [proceed],
    named_sleeps,
    named_sleeps2,
    |run, input| {
        run.sleep("initial-delay", 5 * MINUTE).await?;
        run.sleep("cooldown-period", HOUR).await?;
        TaskA.start(run, input).await
    },
    |run, input| {
        run.sleep("cooldown-period", HOUR).await?;
        run.sleep("initial-delay", 5 * MINUTE).await?;
        TaskA.start(run, input).await
    }
);

// Output shapes.
#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct User {
    pub email: String,
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct UserRenamed {
    pub email_address: String,
}

#[aiki::task(name = "fetch-user")]
pub async fn fetch_user(id: String) -> Result<User, TaskError> {
    Ok(User {
        email: format!("{id}@example.com"),
    })
}

#[aiki::task(name = "fetch-user")]
pub async fn fetch_user_renamed(id: String) -> Result<UserRenamed, TaskError> {
    Ok(UserRenamed {
        email_address: format!("{id}@example.com"),
    })
}

case!(
    "shape",
    [proceed],
    shape,
    shape2,
    |run, input| {
        let user = FetchUser.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(user.email)
    },
    |run, input| {
        let user = FetchUserRenamed.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(user.email_address)
    }
);

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "version")]
pub enum ContactV1 {
    #[serde(rename = "1")]
    V1 { email: String },
}

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "version")]
pub enum ContactV2 {
    #[serde(rename = "1")]
    V1 { email: String },
    #[serde(rename = "2")]
    V2 { email_address: String },
}

#[aiki::task(name = "fetch-contact")]
pub async fn fetch_contact(id: String) -> Result<ContactV1, TaskError> {
    Ok(ContactV1::V1 {
        email: format!("{id}@example.com"),
    })
}

#[aiki::task(name = "fetch-contact")]
pub async fn fetch_contact2(id: String) -> Result<ContactV2, TaskError> {
    Ok(ContactV2::V2 {
        email_address: format!("{id}@example.com"),
    })
}

case!(
    "versioned-output",
    [proceed],
    contact,
    contact2,
    |run, input| {
        let ContactV1::V1 { email } = FetchContact.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(email)
    },
    |run, input| {
        let email = match FetchContact2.start(run, input).await? {
            ContactV2::V1 { email } => email,
            ContactV2::V2 { email_address } => email_address,
        };
        run.events().proceed().wait().await?;
        Ok(email)
    }
);

// Child starts are manifest entries: the same rule.
#[aiki::workflow(name = "echo-child", version = "1")]
pub async fn echo_child(_run: &Run, input: String) -> Result<String, WorkflowError> {
    Ok(format!("child({input})"))
}

case!(
    "child-input",
    [proceed],
    child_input,
    child_input2,
    |run, input| {
        let out = run.child::<EchoChild>(input).await?.wait().await?;
        run.events().proceed().wait().await?;
        Ok(out)
    },
    |run, input| {
        let out = run
            .child::<EchoChild>(format!("{input}!"))
            .await?
            .wait()
            .await?;
        run.events().proceed().wait().await?;
        Ok(out)
    }
);

case!(
    "child-append",
    [proceed],
    child_append,
    child_append2,
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    },
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        run.child::<EchoChild>(a).await?.wait().await
    }
);

// A `#[task]` fn called directly from workflow code.
pub static CHARGES: AtomicUsize = AtomicUsize::new(0);

#[aiki::task(name = "charge-card")]
pub async fn charge_card(cents: u64) -> Result<u64, TaskError> {
    CHARGES.fetch_add(1, Ordering::SeqCst);
    Ok(cents)
}

case!(
    "direct-call",
    [proceed],
    direct_call,
    direct_call2,
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        Ok(a)
    },
    |run, input| {
        let a = TaskA.start(run, input).await?;
        run.events().proceed().wait().await?;
        let cents = charge_card(700).await.map_err(WorkflowError::failed)?;
        Ok(format!("{a}:{cents}"))
    }
);

// A version this build drops.
#[aiki::workflow(name = "stranded", version = "1")]
pub async fn stranded(run: &Run, _input: String) -> Result<(), WorkflowError> {
    run.sleep("forever", HOUR).await?;
    Ok(())
}

#[aiki::workflow(name = "stranded", version = "2")]
pub async fn stranded_v2(_run: &Run, _input: String) -> Result<(), WorkflowError> {
    Ok(())
}

// Another service's workflow, in the same store.
#[aiki::workflow(name = "someone-else", version = "1")]
pub async fn someone_else(run: &Run, _input: String) -> Result<(), WorkflowError> {
    run.sleep("forever", HOUR).await?;
    Ok(())
}
