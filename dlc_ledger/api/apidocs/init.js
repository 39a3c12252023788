// Swagger UI on this server's own OpenAPI document, loaded from this origin only (a file,
// not an inline script: the page's Content-Security-Policy runs none). No validator badge:
// it would load an image from swagger.io. A token typed into "Authorize" stays in this page
// (persistAuthorization is off: nothing in localStorage).
window.addEventListener("load", () => {
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    validatorUrl: null,
    persistAuthorization: false,
  });
});
