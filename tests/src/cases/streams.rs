//! Streams and events (with the soundness rules of the book's soundness chapter).

use crate::{Case, ensure, fail};
use gpu_mem::Runtime;
use gpu_mem::prelude::*;
use ndarray::{Array, ArrayD};

pub fn cases() -> Vec<Case> {
    crate::cases!["streams":
        async_round_trip_through_pinned_memory,
        pageable_copies_on_a_stream,
        host_access_waits_for_in_flight_copies,
        device_memory_outlives_stream_work,
        auto_synchronize_and_query,
        events_order_streams_and_time_work,
        many_operations_in_order,
    ]
}

// Large enough to outlast a stream launch natively; small under Miri, which is ~1000x slower.
const N: usize = if cfg!(miri) { 256 } else { 1 << 20 };

fn async_round_trip_through_pinned_memory(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let mut src = dev.pinned_array::<f32>(&[N]).map_err(fail("pinned"))?;
    src.view_mut()
        .map_err(fail("view"))?
        .iter_mut()
        .enumerate()
        .for_each(|(i, v)| *v = i as f32);
    let d = stream.to_device(&src).map_err(fail("to_device"))?;
    let mut dst = dev.pinned_array::<f32>(&[N]).map_err(fail("pinned"))?;
    stream
        .copy_to_host(&d, &mut dst)
        .map_err(fail("copy_to_host"))?;
    stream.synchronize().map_err(fail("sync"))?;
    let got = dst.view().map_err(fail("view"))?;
    ensure!(
        got.iter().enumerate().all(|(i, v)| *v == i as f32),
        "values after sync"
    );
    Ok(())
}

fn pageable_copies_on_a_stream(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let mut host = Array::from_iter(0..N as i64);
    let mut d = stream.to_device(&host).map_err(fail("to_device"))?;
    // The source was staged: overwriting it now cannot change what reaches the device.
    host.fill(-1);
    let mut out = Array::<i64, _>::zeros(N);
    stream
        .copy_to_host(&d, &mut out)
        .map_err(fail("copy_to_host"))?;
    ensure!(
        out == Array::from_iter(0..N as i64),
        "pageable destination is complete on return"
    );
    stream
        .copy_from_host(&mut d, &host)
        .map_err(fail("copy_from_host"))?;
    stream.synchronize().map_err(fail("sync"))?;
    ensure!(
        d.get(&[5]).map_err(fail("get"))? == -1,
        "copy_from_host on a stream"
    );
    Ok(())
}

fn host_access_waits_for_in_flight_copies(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let d = dev
        .to_device(&Array::from_elem(N, 3u32))
        .map_err(fail("to_device"))?;
    let mut dst = dev.pinned_array::<u32>(&[N]).map_err(fail("pinned"))?;
    for _ in 0..4 {
        stream
            .copy_to_host(&d, &mut dst)
            .map_err(fail("copy_to_host"))?;
    }
    // No synchronize: reading the destination waits for the copies into it.
    let view = dst.view().map_err(fail("view"))?;
    ensure!(view.iter().all(|v| *v == 3), "reads see completed copies");
    Ok(())
}

fn device_memory_outlives_stream_work(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let src = dev
        .to_device(&Array::from_elem(N, 9u8))
        .map_err(fail("to_device"))?;
    let mut dst = dev
        .device_array::<u8>(&[N], Order::C)
        .map_err(fail("alloc"))?;
    stream
        .copy_from_device(&mut dst, &src)
        .map_err(fail("copy"))?;
    drop(src); // freed only after the copy has run
    stream.synchronize().map_err(fail("sync"))?;
    ensure!(
        dst.copy_to_host()
            .map_err(fail("copy"))?
            .iter()
            .all(|v| *v == 9),
        "copy completed from dropped source"
    );
    drop(dst);
    drop(stream);
    dev.check_release_errors().map_err(fail("release"))?;
    Ok(())
}

fn auto_synchronize_and_query(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let d = dev
        .to_device(&Array::from_elem(N, 1.5f64))
        .map_err(fail("to_device"))?;
    let mut dst = dev.pinned_array::<f64>(&[N]).map_err(fail("pinned"))?;
    {
        let s = stream.auto_synchronize();
        s.copy_to_host(&d, &mut dst).map_err(fail("copy"))?;
    }
    ensure!(
        stream.query().map_err(fail("query"))?,
        "idle after auto_synchronize"
    );
    let guard = stream.auto_synchronize();
    guard
        .memset(
            &mut dev
                .device_array::<u8>(&[16], Order::C)
                .map_err(fail("alloc"))?,
            1,
        )
        .map_err(fail("memset"))?;
    guard.finish().map_err(fail("finish"))?;
    Ok(())
}

fn events_order_streams_and_time_work(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let (s1, s2) = (
        dev.stream().map_err(fail("stream"))?,
        dev.stream().map_err(fail("stream"))?,
    );
    let start = s1.record_event().map_err(fail("record"))?;
    let mut a = dev
        .device_array::<u32>(&[N], Order::C)
        .map_err(fail("alloc"))?;
    let src = dev.pinned_array::<u32>(&[N]).map_err(fail("pinned"))?;
    s1.memset(&mut a, 7).map_err(fail("memset"))?;
    s1.copy_from_host(&mut a, &src).map_err(fail("copy"))?;
    s1.memset(&mut a, 2).map_err(fail("memset"))?;
    let end = s1.record_event().map_err(fail("record"))?;
    s2.wait_event(&end).map_err(fail("wait"))?;
    let mut out = dev.pinned_array::<u32>(&[N]).map_err(fail("pinned"))?;
    s2.copy_to_host(&a, &mut out).map_err(fail("copy"))?;
    s2.synchronize().map_err(fail("sync"))?;
    ensure!(
        out.view()
            .map_err(fail("view"))?
            .iter()
            .all(|v| *v == 0x0202_0202),
        "s2 ran after s1's work"
    );
    end.synchronize().map_err(fail("event sync"))?;
    ensure!(end.query().map_err(fail("query"))?, "event complete");
    let ms = end.elapsed_since(&start).map_err(fail("elapsed"))?;
    ensure!(ms >= 0.0 && ms.is_finite(), "elapsed {ms}");
    let untimed = dev.event(false).map_err(fail("event"))?;
    untimed.record(&s1).map_err(fail("record"))?;
    ensure!(
        untimed.elapsed_since(&start).is_err(),
        "timing disabled is an error"
    );
    let never = dev.event(true).map_err(fail("event"))?;
    ensure!(
        never.elapsed_since(&start).is_err(),
        "unrecorded event is an error"
    );
    Ok(())
}

fn many_operations_in_order(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let stream = dev.stream().map_err(fail("stream"))?;
    let mut d = dev
        .device_array::<i32>(&[1024], Order::C)
        .map_err(fail("alloc"))?;
    let mut stage = dev.pinned_array::<i32>(&[1024]).map_err(fail("pinned"))?;
    for round in 0..50 {
        stage.view_mut().map_err(fail("view"))?.fill(round);
        stream
            .copy_from_host(&mut d, &stage)
            .map_err(fail("copy"))?;
    }
    let got: ArrayD<i32> = {
        stream.synchronize().map_err(fail("sync"))?;
        d.copy_to_host().map_err(fail("copy"))?
    };
    ensure!(got.iter().all(|v| *v == 49), "last write wins");
    Ok(())
}
