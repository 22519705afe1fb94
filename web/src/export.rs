//! Downloads: a table as CSV or Markdown, a chart as PNG.

use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;

/// Offer `text` as a file download.
pub fn download_text(file_name: &str, mime: &str, text: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)
        .map_err(|_| "the browser refused to make the file")?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)
        .map_err(|_| "the browser refused to make a link to the file")?;
    let result = click_link(file_name, &url);
    // Let the download (and anything else reading the link) finish first.
    if let Some(window) = web_sys::window() {
        let revoke = Closure::once_into_js(move || {
            let _ = web_sys::Url::revoke_object_url(&url);
        });
        let _ = window
            .set_timeout_with_callback_and_timeout_and_arguments_0(revoke.unchecked_ref(), 60_000);
    }
    result
}

/// Offer a canvas as a PNG download (the backing store, at device resolution).
pub fn download_canvas_png(
    file_name: &str,
    canvas: &web_sys::HtmlCanvasElement,
) -> Result<(), String> {
    let url = canvas
        .to_data_url_with_type("image/png")
        .map_err(|_| "the browser refused to encode the chart")?;
    click_link(file_name, &url)
}

fn click_link(file_name: &str, href: &str) -> Result<(), String> {
    let document = web_sys::window()
        .and_then(|w| w.document())
        .ok_or("no document")?;
    let a: web_sys::HtmlAnchorElement = document
        .create_element("a")
        .map_err(|_| "cannot create a link")?
        .dyn_into()
        .map_err(|_| "not a link")?;
    a.set_href(href);
    a.set_download(file_name);
    a.click();
    Ok(())
}

/// A file-name-safe version of an id.
pub fn file_stem(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}
