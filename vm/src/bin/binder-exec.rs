//! The VM's init: see `binder_vm::exec`.

fn main() {
    binder_vm::exec::main()
}
