//! Entry point of the viewer: mounts the app, nothing else.
fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(stallscope_web::App);
}
