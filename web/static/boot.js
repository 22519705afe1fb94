// Starts the viewer (wasm-bindgen's module); relative, so a site works under any sub-path.
import init from './stallscope_web.js';
init();
