// Exact arithmetic on the API's figures: decimal strings (GPU-hours) and money in minor
// units are added and rounded as integers, never as floats.

/** "1.5" + "2.25" -> "3.75" (exact; the longer fraction kept). */
export function addDecimals(values) {
  const parts = values.filter((v) => v !== null && v !== undefined).map(String);
  const digits = Math.max(0, ...parts.map((v) => (v.split(".")[1] ?? "").length));
  let total = 0n;
  for (const value of parts) {
    const negative = value.startsWith("-");
    const [whole, frac = ""] = value.replace("-", "").split(".");
    const scaled = BigInt(whole + frac.padEnd(digits, "0"));
    total += negative ? -scaled : scaled;
  }
  return fixed(total, digits);
}

/** An integer count of 10^-digits as a decimal string. */
export function fixed(scaled, digits) {
  const negative = scaled < 0n;
  const text = (negative ? -scaled : scaled).toString().padStart(digits + 1, "0");
  const whole = digits ? text.slice(0, -digits) : text;
  const frac = digits ? `.${text.slice(-digits)}` : "";
  return `${negative ? "-" : ""}${whole}${frac}`;
}

/** Money in minor units -> "1,267.21 USD" (as the API's *_display strings). */
export function money(minor, scale, currency) {
  const text = fixed(BigInt(minor), scale);
  const [whole, frac] = text.replace("-", "").split(".");
  const grouped = new Intl.NumberFormat("en-US").format(BigInt(whole));
  return `${text.startsWith("-") ? "-" : ""}${grouped}${frac ? `.${frac}` : ""} ${currency}`;
}

/** "10443.35" to 1 digit -> "10443.4": a decimal string rounded half away from zero,
 *  exactly (always `digits` fraction digits). */
export function roundDecimal(value, digits) {
  const negative = value.startsWith("-");
  const [whole, frac = ""] = value.replace("-", "").split(".");
  let scaled = BigInt(whole + frac.slice(0, digits).padEnd(digits, "0"));
  if ((frac[digits] ?? "0") >= "5") scaled += 1n;
  return fixed(negative && scaled !== 0n ? -scaled : scaled, digits);
}
