//! `Stream::add_callback` on the simulator: callbacks run after the work enqueued before them,
//! in order, off the caller's thread, may call gpu-mem themselves, and one that panics does not
//! stop the others.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use gpu_mem::prelude::*;
use std::sync::mpsc;
use std::time::Duration;

fn device() -> Device {
    Runtime::open_kind(gpu_mem::BackendKind::Sim)
        .unwrap()
        .device(0)
        .unwrap()
}

#[test]
fn a_callback_sees_the_work_before_it_done() {
    let dev = device();
    let stream = dev.stream().unwrap();
    // Big enough that the simulator queues the copy rather than making it at once.
    let mut pinned = dev.pinned_array::<u8>(&[1 << 20]).unwrap();
    pinned.view_mut().unwrap().fill(7);
    let on_device = stream.to_device(&pinned).unwrap();
    let (sender, receiver) = mpsc::channel();
    let check = on_device.view();
    let caller = std::thread::current().id();
    stream
        .add_callback(move |outcome| {
            // The copy before the callback is complete: a synchronous read sees its bytes.
            let host = check.copy_to_host().unwrap();
            let elsewhere = std::thread::current().id() != caller;
            sender
                .send((outcome.is_ok(), host.iter().all(|&b| b == 7), elsewhere))
                .unwrap();
        })
        .unwrap();
    let (ok, copied, elsewhere) = receiver.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(ok && copied && elsewhere);
}

#[test]
fn callbacks_run_in_order_and_survive_a_panicking_one() {
    let dev = device();
    let stream = dev.stream().unwrap();
    let (sender, receiver) = mpsc::channel();
    for i in 0..5 {
        let sender = sender.clone();
        stream
            .add_callback(move |outcome| {
                outcome.unwrap();
                if i == 2 {
                    panic!("callback {i} panics on purpose");
                }
                sender.send(i).unwrap();
            })
            .unwrap();
    }
    drop(sender);
    let order: Vec<i32> = receiver.iter().collect();
    assert_eq!(order, [0, 1, 3, 4]);
}

#[test]
fn a_callback_may_use_its_own_stream() {
    let dev = device();
    let stream = std::sync::Arc::new(dev.stream().unwrap());
    let (sender, receiver) = mpsc::channel();
    let inner = std::sync::Arc::clone(&stream);
    stream
        .add_callback(move |_| {
            let array = inner.to_device(&ndarray::Array1::<f32>::ones(16)).unwrap();
            inner.synchronize().unwrap();
            sender.send(array.copy_to_host().unwrap().sum()).unwrap();
        })
        .unwrap();
    assert_eq!(
        receiver.recv_timeout(Duration::from_secs(30)).unwrap(),
        16.0
    );
}
