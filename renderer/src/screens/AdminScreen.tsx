export function AdminScreen() {
  return <section>todo</section>;
}
