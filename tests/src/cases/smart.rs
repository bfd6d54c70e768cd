//! SmartArray: data moves only when the side asked for is stale.

use crate::{Case, Requires, ensure, fail};
use gpu_mem::Runtime;
use gpu_mem::prelude::*;
use gpu_mem::smart::{SmartRef, TransferCounts};
use ndarray::{Array2, ArrayD};

pub fn cases() -> Vec<Case> {
    let mut cases = crate::cases!["smart": transfers_only_when_stale, mark_changed_invalidates_the_other_side, mark_changed_on_a_side_without_storage];
    cases.extend(crate::cases!["smart", Requires::Simulator; kernels_leave_data_on_the_device]);
    cases
}

fn counts(to_device: u64, to_host: u64) -> TransferCounts {
    TransferCounts { to_device, to_host }
}

fn transfers_only_when_stale(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let host = Array2::from_shape_fn((4, 4), |(i, j)| (i * 4 + j) as f64).into_dyn();
    let mut a = SmartArray::new(&dev, host.clone());
    ensure!(
        a.is_valid(Where::Host) && !a.is_valid(Where::Device),
        "starts on the host"
    );
    ensure!(
        a.device()
            .map_err(fail("device"))?
            .copy_to_host()
            .map_err(fail("copy"))?
            == host,
        "device copy"
    );
    ensure!(
        a.transfers() == counts(1, 0),
        "one H2D: {:?}",
        a.transfers()
    );
    a.device().map_err(fail("device"))?;
    a.host().map_err(fail("host"))?;
    ensure!(
        a.transfers() == counts(1, 0),
        "no transfer when both sides are valid: {:?}",
        a.transfers()
    );
    a.host_mut().map_err(fail("host_mut"))?[[0, 0]] = -1.0;
    ensure!(
        !a.is_valid(Where::Device),
        "host writes make the device side stale"
    );
    ensure!(
        a.device()
            .map_err(fail("device"))?
            .get(&[0, 0])
            .map_err(fail("get"))?
            == -1.0,
        "device sees the host write"
    );
    ensure!(a.transfers() == counts(2, 0), "{:?}", a.transfers());
    match a.get(Where::Host).map_err(fail("get"))? {
        SmartRef::Host(h) => ensure!(h[[0, 0]] == -1.0, "get(Host)"),
        SmartRef::Device(_) => return Err("get(Host) returned the device side".into()),
    }
    let mut g = SmartArray::<f32>::on_device(&dev, &[3, 2], Order::F).map_err(fail("on_device"))?;
    ensure!(
        g.host().map_err(fail("host"))?.iter().all(|v| *v == 0.0),
        "on_device starts zeroed"
    );
    ensure!(
        g.transfers() == counts(0, 1),
        "one D2H for the first host read: {:?}",
        g.transfers()
    );
    Ok(())
}

fn mark_changed_invalidates_the_other_side(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut a = SmartArray::new(&dev, ArrayD::from_elem(ndarray::IxDyn(&[8]), 1i32));
    a.device().map_err(fail("device"))?;
    a.device_mut()
        .map_err(fail("device_mut"))?
        .set(&[2], 9)
        .map_err(fail("set"))?;
    ensure!(
        !a.is_valid(Where::Host),
        "device writes make the host stale"
    );
    ensure!(
        a.host().map_err(fail("host"))?[[2]] == 9,
        "host sees the device write"
    );
    a.mark_changed(Where::Host);
    ensure!(
        a.is_valid(Where::Host) && !a.is_valid(Where::Device),
        "mark_changed(Host)"
    );
    a.mark_changed(Where::Device);
    ensure!(
        a.is_valid(Where::Device) && !a.is_valid(Where::Host),
        "mark_changed(Device)"
    );
    Ok(())
}

/// Marking a side changed that has no storage yet (nothing was ever put there) leaves both
/// sides readable, with the data the other side holds: it used to mark the empty side valid,
/// and reading it then failed ("a side was valid without storage") until the other side was
/// marked changed.
fn mark_changed_on_a_side_without_storage(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let values = ArrayD::from_shape_vec(ndarray::IxDyn(&[4]), vec![1i32, 2, 3, 4])
        .map_err(|e| e.to_string())?;
    // Created on the host, the device side never made.
    let mut a = SmartArray::new(&dev, values.clone());
    a.mark_changed(Where::Device);
    ensure!(
        a.device()
            .map_err(fail("device"))?
            .copy_to_host()
            .map_err(fail("copy"))?
            == values,
        "device side after mark_changed(Device) on a host-only array"
    );
    ensure!(
        *a.host().map_err(fail("host"))? == values,
        "host side after mark_changed(Device) on a host-only array"
    );
    // Created on the device, the host side never made.
    let mut b = SmartArray::<i32>::on_device(&dev, &[4], Order::C).map_err(fail("on_device"))?;
    b.device_mut()
        .map_err(fail("device_mut"))?
        .copy_from_host(&values)
        .map_err(fail("fill"))?;
    b.mark_changed(Where::Host);
    ensure!(
        *b.host().map_err(fail("host"))? == values,
        "host side after mark_changed(Host) on a device-only array"
    );
    ensure!(
        b.device()
            .map_err(fail("device"))?
            .copy_to_host()
            .map_err(fail("copy"))?
            == values,
        "device side after mark_changed(Host) on a device-only array"
    );
    Ok(())
}

fn kernels_leave_data_on_the_device(rt: &Runtime) -> Result<(), String> {
    let dev = rt.device(0).map_err(fail("device"))?;
    let mut a = SmartArray::new(&dev, ArrayD::from_elem(ndarray::IxDyn(&[64]), 1.0f32));
    let double = Kernel::sim("double", |t| {
        let a = t.array::<f32>(0);
        let i = t.grid1();
        a.set([i], a.get([i]) * 2.0);
    });
    for _ in 0..3 {
        // SAFETY: the kernel stays inside its argument.
        unsafe { dev.launch(&double, LaunchConfig::new(2, 32), &mut [&mut a]) }
            .map_err(fail("launch"))?;
    }
    ensure!(
        a.transfers() == counts(1, 0),
        "moved once to the device for three launches: {:?}",
        a.transfers()
    );
    ensure!(
        !a.is_valid(Where::Host),
        "the kernel made the host side stale"
    );
    ensure!(
        a.host().map_err(fail("host"))?.iter().all(|v| *v == 8.0),
        "results after three launches"
    );
    ensure!(
        a.transfers() == counts(1, 1),
        "copied back once: {:?}",
        a.transfers()
    );
    a.host().map_err(fail("host"))?;
    ensure!(a.transfers() == counts(1, 1), "no second copy back");
    Ok(())
}
