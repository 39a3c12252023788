// The page's one alert region: errors (problem JSON from the API) are shown there.

export function showError(error) {
  const region = document.getElementById("error");
  region.textContent = error instanceof Error ? error.message : String(error);
  region.hidden = false;
}

export function clearError() {
  const region = document.getElementById("error");
  region.textContent = "";
  region.hidden = true;
}
